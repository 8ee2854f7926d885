"""The IPU Adam optimizer (`ipu_tensorflow_addons.keras.optimizers.AdamIpuOptimizer`)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.optimizers import adam_moments
from openipu._src.addons.keras.optimizers import ipu_optimizer_base as base


@tf_keras.utils.register_keras_serializable(package="openipu")
class AdamIpuOptimizer(base.IpuOptimizerBase):
    """Adam (and AMSGrad) with state dtypes independent of the variables' dtypes.

    With `t = iterations + 1`, gradient `g` and the compute dtype
    `optimizer_compute_precisions[0]` (float32 by default):

        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g**2
        m_hat, v_hat = m / (1 - beta_1**t), v / (1 - beta_2**t)   (m, v if not debiasing)
        vhat = max(vhat, v_hat)                                    (amsgrad; the slot keeps it)
        var -= lr * m_hat / (sqrt(v_hat or vhat) + epsilon)

    CONFLICT (fact sheet 2.1): the API text calls `epsilon` the "epsilon hat" of
    the Keras form; this follows the original's code, which is Algorithm 1 of
    Kingma and Ba (epsilon added to the debiased sqrt(v)), so results differ
    slightly from `tf_keras.optimizers.Adam` when epsilon matters.

    Slots `m`, `v` (and `vhat` with amsgrad) take `m_dtype`, `v_dtype`,
    `vhat_dtype`, or the variable's dtype when None. Keyword arguments: those
    of Keras (`clipnorm`, `clipvalue`, `global_clipnorm`, `lr`, `decay`) and
    of `IpuOptimizerBase` (`optimizer_compute_precisions`, one dtype;
    `outline_apply_gradients*`, accepted and ignored on the emulated IPU).
    """

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon: float = 1e-7,
        amsgrad: bool = False,
        name: str = "Adam",
        m_dtype=None,
        v_dtype=None,
        vhat_dtype=None,
        debiasing: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(name, **kwargs)
        owner = type(self).__name__
        # As the original (keras.optimizers.Adam underneath, ipu_tensorflow_addons/keras/
        # optimizers/adam_optimizer.py): betas, epsilon, amsgrad and debiasing are taken as
        # given, unchecked; the flags by truth value.
        self._set_hyper("learning_rate", kwargs.get("lr", learning_rate))
        self._set_hyper("decay", self._initial_decay)
        self._set_hyper("beta_1", beta_1)
        self._set_hyper("beta_2", beta_2)
        self.epsilon = epsilon or tf_keras.backend.epsilon()
        self.amsgrad = amsgrad
        self.debiasing = debiasing
        self.m_dtype = base.float_dtype_or_none(owner, "m_dtype", m_dtype)
        self.v_dtype = base.float_dtype_or_none(owner, "v_dtype", v_dtype)
        self.vhat_dtype = base.float_dtype_or_none(owner, "vhat_dtype", vhat_dtype)
        self._slot_dtypes = {"m": self.m_dtype, "v": self.v_dtype, "vhat": self.vhat_dtype}

    def _create_slots(self, var_list) -> None:
        for var in var_list:
            self.add_slot(var, "m")
        for var in var_list:
            self.add_slot(var, "v")
        if self.amsgrad:
            for var in var_list:
                self.add_slot(var, "vhat")

    def _resource_apply_dense(self, grad, var, apply_state=None):
        compute_dtype = self.opt_dtypes[0]
        learning_rate = self._decayed_lr(compute_dtype)
        epsilon = tf.constant(self.epsilon, compute_dtype)
        grad = tf.cast(grad, compute_dtype)
        m_hat, v_hat, updates = adam_moments.updated_moments(self, grad, var, compute_dtype)
        if self.amsgrad:
            vhat_slot = self.get_slot(var, "vhat")
            v_hat = tf.maximum(tf.cast(vhat_slot, compute_dtype), v_hat)
            updates.append(vhat_slot.assign(tf.cast(v_hat, vhat_slot.dtype), read_value=False))
        delta = learning_rate * m_hat / (tf.sqrt(v_hat) + epsilon)
        updates.append(var.assign_sub(tf.cast(delta, base.variable_dtype(var)), read_value=False))
        return tf.group(*updates)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "learning_rate": self._serialize_hyperparameter("learning_rate"),
            "decay": self._initial_decay,
            "beta_1": self._serialize_hyperparameter("beta_1"),
            "beta_2": self._serialize_hyperparameter("beta_2"),
            "epsilon": self.epsilon,
            "amsgrad": self.amsgrad,
            "m_dtype": base.dtype_name_or_none(self.m_dtype),
            "v_dtype": base.dtype_name_or_none(self.v_dtype),
            "vhat_dtype": base.dtype_name_or_none(self.vhat_dtype),
            "debiasing": self.debiasing,
        }
