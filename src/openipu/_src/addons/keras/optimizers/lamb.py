"""The IPU LAMB optimizer (`ipu_tensorflow_addons.keras.optimizers.LAMBIpuOptimizer`)."""

from __future__ import annotations

import re

import numpy as np
import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.optimizers import adam_moments
from openipu._src.addons.keras.optimizers import ipu_optimizer_base as base

_VARIABLE_NAME_SUFFIX = re.compile(r":\d+$")


@tf_keras.utils.register_keras_serializable(package="openipu")
class LAMBIpuOptimizer(base.IpuOptimizerBase):
    """LAMB (You et al., 2019), computed in two stages of chosen precision.

    Stage 1, in `optimizer_compute_precisions[0]`, with `t = iterations + 1`:

        m, v, m_hat, v_hat as in Adam (m_hat, v_hat = m, v if not debiasing)
        u = m_hat / (sqrt(v_hat) + epsilon) + weight_decay_rate * var
        ratio = min(||var||, weight_norm_clip) / ||u||   (1 if either norm is 0)

    Stage 2, in `optimizer_compute_precisions[1]`: `var -= (lr * ratio) * u`.

    A variable whose name (without `:0`) contains a match (`re.search`) of a
    pattern in `exclude_from_weight_decay` gets no weight decay; one matching
    `exclude_from_layer_adaptation` gets `ratio = 1`. The second list does not
    default to the first (unlike TensorFlow Addons' LAMB). A falsy `epsilon`
    means 1e-7. Unlike the original, `get_config` also keeps the two lists and
    `weight_norm_clip` (the fact sheet's recommendation), so configs
    round-trip. Slots `m`, `v` take `m_dtype`, `v_dtype`, or the variable's
    dtype when None. Keyword arguments: those of Keras (`clipnorm`,
    `clipvalue`, `global_clipnorm`, `lr`, `decay`) and `outline_apply_gradients*`
    (accepted and ignored on the emulated IPU).
    """

    _compute_stage_count = 2

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon: float = 1e-6,
        weight_decay_rate=0.0,
        exclude_from_weight_decay=None,
        exclude_from_layer_adaptation=None,
        name: str = "LAMB",
        debiasing: bool = True,
        m_dtype=None,
        v_dtype=None,
        weight_norm_clip=None,
        optimizer_compute_precisions=(tf.float32, tf.float32),
        **kwargs,
    ) -> None:
        super().__init__(name, optimizer_compute_precisions=optimizer_compute_precisions, **kwargs)
        owner = type(self).__name__
        # As the original (ipu_tensorflow_addons/keras/optimizers/lamb_optimizer.py): betas,
        # epsilon, the weight decay rate and the norm clip are taken as given, debiasing by
        # truth value; only a norm clip that is no number is refused (the original's cast of
        # it fails when gradients are applied).
        if weight_norm_clip is not None and (
            isinstance(weight_norm_clip, bool)
            or not isinstance(weight_norm_clip, (int, float, np.integer, np.floating))
        ):
            raise ValueError(
                f"{owner}: weight_norm_clip must be None or a number, got {weight_norm_clip!r}"
            )
        self._set_hyper("learning_rate", kwargs.get("lr", learning_rate))
        self._set_hyper("decay", self._initial_decay)
        self._set_hyper("beta_1", beta_1)
        self._set_hyper("beta_2", beta_2)
        self._set_hyper("weight_decay_rate", weight_decay_rate)
        self.epsilon = epsilon or 1e-7
        self.debiasing = debiasing
        self.m_dtype = base.float_dtype_or_none(owner, "m_dtype", m_dtype)
        self.v_dtype = base.float_dtype_or_none(owner, "v_dtype", v_dtype)
        self.weight_norm_clip = None if weight_norm_clip is None else float(weight_norm_clip)
        # Kept as given and searched with re.search when gradients are applied, as the
        # original (keras/optimizers/lamb_optimizer.py): a bad pattern fails there.
        self.exclude_from_weight_decay = exclude_from_weight_decay
        self.exclude_from_layer_adaptation = exclude_from_layer_adaptation
        self._slot_dtypes = {"m": self.m_dtype, "v": self.v_dtype}

    def _create_slots(self, var_list) -> None:
        for var in var_list:
            self.add_slot(var, "m")
        for var in var_list:
            self.add_slot(var, "v")

    # The original's names for the two exclusion checks (lamb_optimizer.py), which
    # programs subclassing the optimizer override.
    def _do_use_weight_decay(self, param_name: str) -> bool:
        """Whether the variable named `param_name` gets weight decay."""
        return not _matches_any(self.exclude_from_weight_decay, param_name)

    def _do_layer_adaptation(self, param_name: str) -> bool:
        """Whether the update of the variable named `param_name` is scaled by its trust ratio."""
        return not _matches_any(self.exclude_from_layer_adaptation, param_name)

    def _resource_apply_dense(self, grad, var, apply_state=None):
        stage_1_dtype, stage_2_dtype = self.opt_dtypes
        variable_name = _VARIABLE_NAME_SUFFIX.sub("", var.name)
        learning_rate = self._decayed_lr(stage_1_dtype)
        epsilon = tf.constant(self.epsilon, stage_1_dtype)
        grad = tf.cast(grad, stage_1_dtype)
        weights = tf.cast(var, stage_1_dtype)
        m_hat, v_hat, updates = adam_moments.updated_moments(self, grad, var, stage_1_dtype)
        update = m_hat / (tf.sqrt(v_hat) + epsilon)
        if self._do_use_weight_decay(variable_name):
            update += self._get_hyper("weight_decay_rate", stage_1_dtype) * weights

        ratio = tf.constant(1.0, stage_1_dtype)
        if self._do_layer_adaptation(variable_name):
            weight_norm = tf.norm(weights, ord=2)
            if self.weight_norm_clip is not None:
                weight_norm = tf.minimum(
                    weight_norm, tf.constant(self.weight_norm_clip, stage_1_dtype)
                )
            update_norm = tf.norm(update, ord=2)
            both_positive = tf.logical_and(weight_norm > 0, update_norm > 0)
            # The division is guarded so that a zero norm cannot put a NaN in either branch.
            safe_update_norm = tf.where(both_positive, update_norm, tf.ones_like(update_norm))
            ratio = tf.where(both_positive, weight_norm / safe_update_norm, ratio)

        delta = tf.cast(learning_rate * ratio, stage_2_dtype) * tf.cast(update, stage_2_dtype)
        return tf.group(
            *updates, var.assign_sub(tf.cast(delta, base.variable_dtype(var)), read_value=False)
        )

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "learning_rate": self._serialize_hyperparameter("learning_rate"),
            "decay": self._initial_decay,
            "beta_1": self._serialize_hyperparameter("beta_1"),
            "beta_2": self._serialize_hyperparameter("beta_2"),
            "epsilon": self.epsilon,
            "weight_decay_rate": self._serialize_hyperparameter("weight_decay_rate"),
            "exclude_from_weight_decay": _list_or_none(self.exclude_from_weight_decay),
            "exclude_from_layer_adaptation": _list_or_none(self.exclude_from_layer_adaptation),
            "debiasing": self.debiasing,
            "m_dtype": base.dtype_name_or_none(self.m_dtype),
            "v_dtype": base.dtype_name_or_none(self.v_dtype),
            "weight_norm_clip": self.weight_norm_clip,
        }


def _matches_any(patterns, name: str) -> bool:
    # The original's loop: any iterable of patterns (a str is one of characters).
    return bool(patterns) and any(re.search(pattern, name) is not None for pattern in patterns)


def _list_or_none(patterns):
    return list(patterns) if isinstance(patterns, tuple) else patterns
