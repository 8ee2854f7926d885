"""C's fmod (the remainder with the dividend's sign) with PopART's gradient.

TensorFlow registers no gradient for `truncatemod`. PopART's Fmod has one grad op,
FmodArg0GradOp (willow/src/op/fmod.cpp): the dividend's gradient is the incoming one, summed
over the axes it was broadcast along; the divisor gets none.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.popart.lowering.tensor_utils import widened


def _summed_to_shape(gradient: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
    axes, _ = tf.raw_ops.BroadcastGradientArgs(s0=shape, s1=tf.shape(gradient))
    return tf.reshape(tf.reduce_sum(gradient, axes), shape)


@tf.custom_gradient
def _float_fmod(dividend: tf.Tensor, divisor: tf.Tensor):
    def gradient(upstream: tf.Tensor):
        return _summed_to_shape(upstream, tf.shape(dividend)), None

    return tf.truncatemod(dividend, divisor), gradient


def truncated_remainder(dividend: tf.Tensor, divisor: tf.Tensor) -> tf.Tensor:
    """fmod(dividend, divisor); differentiable in the dividend for floating types."""
    if not dividend.dtype.is_floating:
        return widened(tf.truncatemod, dividend, divisor)
    if dividend.dtype in (tf.float16, tf.bfloat16):
        wide = _float_fmod(tf.cast(dividend, tf.float32), tf.cast(divisor, tf.float32))
        return tf.cast(wide, dividend.dtype)
    return _float_fmod(dividend, divisor)
