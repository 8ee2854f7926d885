"""The IPU SGD optimizer (`ipu_tensorflow_addons.keras.optimizers.SGDIpuOptimizer`)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.optimizers import ipu_optimizer_base as base


@tf_keras.utils.register_keras_serializable(package="openipu")
class SGDIpuOptimizer(base.IpuOptimizerBase):
    """Gradient descent with (Nesterov) momentum, its accumulator in a dtype of its own.

    With gradient `g`, computed in `optimizer_compute_precisions[0]`:

        momentum == 0:  var -= lr * g                       (no slot)
        otherwise:      accum = momentum * accum - lr * g
                        var += accum                        (plain)
                        var += momentum * accum - lr * g    (nesterov, new accum)

    the same as `tf_keras.optimizers.legacy.SGD` in float32. The `momentum`
    slot takes `momentum_accum_dtype`, or the variable's dtype when None.
    Keyword arguments: those of Keras (`clipnorm`, `clipvalue`,
    `global_clipnorm`, `lr`, `decay`) and of `IpuOptimizerBase`
    (`optimizer_compute_precisions`, one dtype; `outline_apply_gradients*`,
    accepted and ignored on the emulated IPU).
    """

    def __init__(
        self,
        learning_rate=0.01,
        momentum=0.0,
        nesterov: bool = False,
        name: str = "SGD",
        momentum_accum_dtype=None,
        **kwargs,
    ) -> None:
        super().__init__(name, **kwargs)
        owner = type(self).__name__
        # Keras's SGD checks (keras/optimizer_v2/gradient_descent.py, the original's base):
        # Python numbers only, and nesterov is taken by truth value.
        if isinstance(momentum, (int, float)) and (momentum < 0 or momentum > 1):
            raise ValueError("`momentum` must be between [0, 1].")
        self._set_hyper("learning_rate", kwargs.get("lr", learning_rate))
        self._set_hyper("decay", self._initial_decay)
        self._momentum = isinstance(momentum, tf.Tensor) or callable(momentum) or momentum > 0
        self._set_hyper("momentum", momentum)
        self.nesterov = nesterov
        self.momentum_accum_dtype = base.float_dtype_or_none(
            owner, "momentum_accum_dtype", momentum_accum_dtype
        )
        self._slot_dtypes = {"momentum": self.momentum_accum_dtype}

    def _create_slots(self, var_list) -> None:
        if self._momentum:
            for var in var_list:
                self.add_slot(var, "momentum")

    def _resource_apply_dense(self, grad, var, apply_state=None):
        compute_dtype = self.opt_dtypes[0]
        learning_rate = self._decayed_lr(compute_dtype)
        grad = tf.cast(grad, compute_dtype)
        var_dtype = base.variable_dtype(var)
        if not self._momentum:
            return var.assign_sub(tf.cast(learning_rate * grad, var_dtype), read_value=False)

        momentum = tf.identity(self._get_hyper("momentum", compute_dtype))
        accum_slot = self.get_slot(var, "momentum")
        accum = momentum * tf.cast(accum_slot, compute_dtype) - learning_rate * grad
        delta = momentum * accum - learning_rate * grad if self.nesterov else accum
        return tf.group(
            accum_slot.assign(tf.cast(accum, accum_slot.dtype), read_value=False),
            var.assign_add(tf.cast(delta, var_dtype), read_value=False),
        )

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "learning_rate": self._serialize_hyperparameter("learning_rate"),
            "decay": self._initial_decay,
            "momentum": self._serialize_hyperparameter("momentum"),
            "nesterov": self.nesterov,
            "momentum_accum_dtype": base.dtype_name_or_none(self.momentum_accum_dtype),
        }
