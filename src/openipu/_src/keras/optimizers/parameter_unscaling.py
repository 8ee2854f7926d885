"""Optimizers that take loss-scaled gradients and unscale them inside their own update
(graphcore/keras keras/ipu/optimizers/parameter_unscaling_optimizer.py).

The `ALSOptimizer` that wraps one passes the gradients on still scaled and, after each
update of its loss scaling factor, hands the optimizer the factor (`_lsf`) and the
previous one (`_prev_lsf`), which its update reads from its apply state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tensorflow as tf

if TYPE_CHECKING:
    from tf_keras.optimizers.legacy import Optimizer as _LegacyOptimizer
else:
    _LegacyOptimizer = object  # mixed into tf_keras's legacy optimizers (als_specializations)


def _is_power_of_two(x) -> bool:
    return (x & (x - 1) == 0) and x != 0


class ParameterUnscalingOptimizer(_LegacyOptimizer):
    """Mixed into a Keras (legacy) optimizer whose update unscales the gradients; its
    `_fixed_arguments` are passed to that optimizer's constructor with the given ones."""

    _fixed_arguments: dict = {}

    def __init__(self, loss_scaling_factor=1, **arguments) -> None:
        super().__init__(**arguments, **self._fixed_arguments)
        self._init_loss_scaling_factor(loss_scaling_factor)

    def _init_loss_scaling_factor(self, loss_scale_factor) -> None:
        if not loss_scale_factor >= 1:
            raise ValueError("loss_scale_factor must be greater than or equal to one.")
        if not _is_power_of_two(loss_scale_factor):
            raise ValueError("loss_scale_factor must be a power of two.")
        self._lsf = tf.cast(loss_scale_factor, tf.float32)
        self._prev_lsf = tf.cast(loss_scale_factor, tf.float32)

    def _prepare_local(self, var_device, var_dtype, apply_state) -> None:
        super()._prepare_local(var_device, var_dtype, apply_state)
        apply_state[(var_device, var_dtype)].update(
            {
                "prev_lsf": tf.convert_to_tensor(self._prev_lsf),
                "lsf": tf.convert_to_tensor(self._lsf),
            }
        )

    def _coefficients(self, var, apply_state) -> dict:
        var_device, var_dtype = var.device, var.dtype.base_dtype
        return (apply_state or {}).get((var_device, var_dtype)) or self._fallback_apply_state(
            var_device, var_dtype
        )
