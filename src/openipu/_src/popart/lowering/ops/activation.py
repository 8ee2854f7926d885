"""Activations: Relu, Sigmoid, Tanh, Softmax/LogSoftmax/Hardmax and the parametrised ones."""

from __future__ import annotations

import math

import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import normalize_axis, shape_list


@register_op("Relu", since=(1, 6, 13, 14))
class Relu(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        if x.dtype.is_integer:
            return tf.maximum(x, tf.zeros_like(x))
        return tf.nn.relu(x)


@register_op("Sigmoid", since=(1, 6, 13))
class Sigmoid(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.sigmoid(x)


@register_op("Tanh", since=(1, 6, 13))
class Tanh(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.tanh(x)


@register_op("LeakyRelu", since=(1, 6, 16))
class LeakyRelu(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.where(x >= 0, x, x * tf.cast(self.attrs.alpha, x.dtype))


@register_op("PRelu", since=(1, 6, 7, 9, 16))
class PRelu(Op):
    elementwise = True

    def compute(self, x: tf.Tensor, slope: tf.Tensor) -> tf.Tensor:
        return tf.where(x >= 0, x, x * slope)


@register_op("Elu", since=(1, 6, 22))
class Elu(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        alpha = tf.cast(self.attrs.alpha, x.dtype)
        return tf.where(x > 0, x, alpha * tf.math.expm1(x))


@register_op("Selu", since=(1, 6, 22))
class Selu(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        alpha = tf.cast(self.attrs.alpha, x.dtype)
        gamma = tf.cast(self.attrs.gamma, x.dtype)
        return gamma * tf.where(x > 0, x, alpha * tf.math.expm1(x))


@register_op("Celu", since=12)
class Celu(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        alpha = tf.cast(self.attrs.alpha, x.dtype)
        return tf.maximum(x, 0) + tf.minimum(tf.zeros_like(x), alpha * tf.math.expm1(x / alpha))


@register_op("ThresholdedRelu", since=(10, 22))
class ThresholdedRelu(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.where(x > tf.cast(self.attrs.alpha, x.dtype), x, tf.zeros_like(x))


@register_op("HardSigmoid", since=(1, 6, 22))
class HardSigmoid(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        alpha = tf.cast(self.attrs.alpha, x.dtype)
        beta = tf.cast(self.attrs.beta, x.dtype)
        return tf.clip_by_value(alpha * x + beta, 0, 1)


@register_op("HardSwish", since=(14, 22))
class HardSwish(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return x * tf.clip_by_value(x / 6 + 0.5, 0, 1)


@register_op("Softplus", since=(1, 22))
class Softplus(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.math.softplus(x)


@register_op("Softsign", since=(1, 22))
class Softsign(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return x / (1 + tf.abs(x))


@register_op("Mish", since=(18, 22))
class Mish(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return x * tf.tanh(tf.math.softplus(x))


@register_op("Swish", since=24)
class Swish(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return x * tf.sigmoid(tf.cast(self.attrs.alpha, x.dtype) * x)


def gelu(x: tf.Tensor, approximate: bool) -> tf.Tensor:
    if approximate:
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + tf.tanh(inner))
    return 0.5 * x * (1 + tf.math.erf(x / math.sqrt(2)))


@register_op("Gelu", since=20)
class Gelu(Op):
    elementwise = True

    def setup(self) -> None:
        if self.attrs.approximate not in ("none", "tanh"):
            self.bad_attribute(
                "approximate", f"must be 'none' or 'tanh', not {self.attrs.approximate!r}"
            )

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return gelu(x, self.attrs.approximate == "tanh")


@register_op("Shrink", since=9)
class Shrink(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        lambd = tf.cast(self.attrs.lambd, x.dtype)
        bias = tf.cast(self.attrs.bias, x.dtype)
        return tf.where(x < -lambd, x + bias, tf.where(x > lambd, x - bias, tf.zeros_like(x)))


class AxisSoftmaxOp(Op):
    """Softmax-like ops. Before opset 13 the input is coerced to 2-D at ``axis``."""

    def along_last_axis(self, x: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        rank = x.shape.rank
        axis = normalize_axis(self.attrs.axis, rank)
        if self.opset_version >= 13:
            if axis == rank - 1:
                return self.along_last_axis(x)
            permutation = list(range(rank))
            permutation[axis], permutation[-1] = permutation[-1], permutation[axis]
            return tf.transpose(self.along_last_axis(tf.transpose(x, permutation)), permutation)
        shape = shape_list(x)
        outer = tf.reduce_prod(shape[:axis]) if axis else 1
        flat = tf.reshape(x, tf.stack([outer, -1]))
        return tf.reshape(self.along_last_axis(flat), tf.shape(x))


def _half_sum(values: tf.Tensor) -> tf.Tensor:
    """The sum over the last axis of half-precision `values`, accumulated in float32 and
    rounded once, as XLA reduces (TensorFlow's half kernel rounds every partial sum): the
    numbers then do not depend on which executor the engine picks."""
    total = tf.reduce_sum(tf.cast(values, tf.float32), axis=-1, keepdims=True)
    return tf.cast(total, values.dtype)


@register_op("Softmax", since=(1, 11, 13))
class Softmax(AxisSoftmaxOp):
    def along_last_axis(self, x: tf.Tensor) -> tf.Tensor:
        if x.dtype not in (tf.float16, tf.bfloat16):
            return tf.nn.softmax(x, axis=-1)
        exponentials = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
        return exponentials / _half_sum(exponentials)


@register_op("LogSoftmax", since=(1, 11, 13))
class LogSoftmax(AxisSoftmaxOp):
    def along_last_axis(self, x: tf.Tensor) -> tf.Tensor:
        if x.dtype not in (tf.float16, tf.bfloat16):
            return tf.nn.log_softmax(x, axis=-1)
        shifted = x - tf.reduce_max(x, axis=-1, keepdims=True)
        return shifted - tf.math.log(_half_sum(tf.exp(shifted)))


@register_op("Hardmax", since=(1, 11, 13))
class Hardmax(AxisSoftmaxOp):
    def along_last_axis(self, x: tf.Tensor) -> tf.Tensor:
        # The first maximum wins, like numpy's argmax.
        return tf.one_hot(tf.argmax(x, axis=-1), tf.shape(x)[-1], dtype=x.dtype)
