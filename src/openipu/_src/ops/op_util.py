"""The original's internal `ipu.ops.op_util` helpers that programs and tests call.

`accumulate_gradients` is the original's (tensorflow/python/ipu/ops/op_util.py): each
(gradient, variable) pair becomes (accumulated gradient, variable), the accumulator of
the type `get_accumulator_dtype` gives. There the accumulator is a device buffer that the
gradient accumulation loop around the step fills (each micro-batch: accumulator *
`accum_scale` + gradient, serialize_gradient_accumulation.cc) and the sink reads after the
loop. Here, where no such loop surrounds the call, the result is the accumulation of one
micro-batch: the buffer starts at zero, so it is the (scaled) gradient in the accumulator's
type. Front ends that accumulate over a loop use `engine.gradient_accumulation`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import tensorflow as tf
from tensorflow.python.framework import ops

#: The types the original's accumulator ops take (ops/poputil/stateful_gradient_accumulate.cc).
_ACCUMULATOR_TYPES = (tf.float16, tf.float32)


def get_accumulator_dtype(variable: Any, dtype_override: Any) -> tf.DType:
    """The accumulator type: the variable's, the one given, or what a callable returns."""
    if dtype_override is None:
        return variable.dtype
    # A DType is callable too: only call the override when it is not a type itself.
    try:
        return tf.as_dtype(dtype_override)
    except TypeError:
        if callable(dtype_override):
            return tf.as_dtype(dtype_override(variable))
        raise


def _individual_gradients(grad: tf.Tensor) -> list[tf.Tensor]:
    """The summands of a gradient built as a sum (the original scales each one, so that the
    sum cannot overflow)."""
    if grad.op.type in ("AddN", "Add", "AddV2", "Identity"):
        return [part for operand in grad.op.inputs for part in _individual_gradients(operand)]
    return [grad]


def _scaled(grad: tf.Tensor, grad_scale: Any) -> tf.Tensor:
    scale = tf.convert_to_tensor(grad_scale, dtype_hint=tf.float32)
    parts = [
        part * (scale if scale.dtype == part.dtype else tf.cast(scale, part.dtype))
        for part in _individual_gradients(grad)
    ]
    return tf.math.add_n(parts)


def _checked_type(dtype: tf.DType, what: str) -> tf.DType:
    base = tf.as_dtype(dtype).base_dtype
    if base not in _ACCUMULATOR_TYPES:
        raise TypeError(
            f"accumulate_gradients: the {what} type must be float16 or float32, got {base.name}"
        )
    return base


def accumulate_gradients(
    grads_and_vars: Iterable[tuple[Any, Any]],
    gradient_accumulation_dtype: Any,
    accum_scale: Any = 1.0,
    grad_scale: Any = None,
    create_accumulator_from_shape: bool = False,
) -> list[tuple[Any, Any]]:
    """(accumulated gradient, variable) for each pair; pairs without a gradient are kept.

    `gradient_accumulation_dtype`: None (the variable's type), a DType, or a callable from
    the variable to a DType. `grad_scale` scales each summand of a gradient before they are
    added; `accum_scale` scales the accumulator before each micro-batch is added (the
    accumulator of a single micro-batch starts at zero). `create_accumulator_from_shape` only
    chose how the original laid out the buffer on the device's tiles.
    """
    del create_accumulator_from_shape  # a tile layout choice: the values are the same
    # The op's `accumulator_scale` input is a float32; it scales a zero accumulator here.
    tf.convert_to_tensor(accum_scale, dtype=tf.float32)
    accumulated: list[tuple[Any, Any]] = []
    for grad, var in grads_and_vars:
        if grad is not None:
            with ops.colocate_with(grad):
                dtype = _checked_type(
                    get_accumulator_dtype(var, gradient_accumulation_dtype), "accumulator"
                )
                grad = tf.convert_to_tensor(grad)
                _checked_type(grad.dtype, "gradient")
                if grad_scale is not None:
                    grad = _scaled(grad, grad_scale)
                grad = tf.cast(grad, dtype)
        accumulated.append((grad, var))
    return accumulated


__all__ = ["accumulate_gradients", "get_accumulator_dtype"]
