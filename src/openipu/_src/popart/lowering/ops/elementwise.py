"""Broadcasting arithmetic: Add, Sub, Mul, Div, Pow, Mod, Max, Min, Sum, Mean, BitShift, bitwise."""

from __future__ import annotations

import functools
from collections.abc import Callable

import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.remainder import truncated_remainder
from openipu._src.popart.lowering.tensor_utils import widened


def legacy_broadcast(a: tf.Tensor, b: tf.Tensor, axis: int | None) -> tf.Tensor:
    """Opsets < 7 broadcast B against A from ``axis`` (numpy-style suffix alignment if None)."""
    if axis is None:
        return b
    a_rank, b_rank = a.shape.rank, b.shape.rank
    axis = axis + a_rank if axis < 0 else axis
    return tf.reshape(b, [1] * axis + b.shape.as_list() + [1] * (a_rank - axis - b_rank))


class BinaryOp(Op):
    """A numpy-broadcasting binary op (opsets >= 7), or one with the legacy ``broadcast`` attr."""

    elementwise = True

    def compute(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        if self.attrs.get("broadcast"):
            b = legacy_broadcast(a, b, self.attrs.get("axis"))
        return self.apply(a, b)

    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError


@register_op("Add", since=(1, 6, 7, 13, 14))
class Add(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        if a.dtype == tf.bool:
            return tf.logical_or(a, b)
        return widened(tf.add, a, b)


@register_op("Sub", since=(1, 6, 7, 13, 14))
class Sub(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return widened(tf.subtract, a, b)


@register_op("Mul", since=(1, 6, 7, 13, 14))
class Mul(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        if a.dtype == tf.bool:
            return tf.logical_and(a, b)
        # PopART multiplies float16 by a one-element float32 in float16 (willow/src/op/
        # mul.cpp, getOutputDataType); the model check has refused other mixed types.
        if {a.dtype, b.dtype} == {tf.float16, tf.float32}:
            a, b = tf.cast(a, tf.float16), tf.cast(b, tf.float16)
        return widened(tf.multiply, a, b)


def divide(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    if a.dtype.is_integer:
        # ONNX integer division truncates toward zero, like C.
        return widened(tf.truncatediv, a, b)
    return tf.divide(a, b)


@register_op("Div", since=(1, 6, 7, 13, 14))
class Div(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return divide(a, b)


@register_op("Pow", since=(1, 7, 12, 13, 15))
class Pow(BinaryOp):
    def apply(self, base: tf.Tensor, exponent: tf.Tensor) -> tf.Tensor:
        if base.dtype.is_integer:
            if exponent.dtype.is_floating:
                result = tf.pow(tf.cast(base, tf.float64), tf.cast(exponent, tf.float64))
                return tf.cast(result, base.dtype)
            return widened(tf.pow, base, tf.cast(exponent, base.dtype))
        return float_power(base, tf.cast(exponent, base.dtype))


def float_power(base: tf.Tensor, exponent: tf.Tensor) -> tf.Tensor:
    """Pow, differentiated as PopART's PowArg0GradOp and PowArg1GradOp patterns do
    (willow/src/patterns/powarg{0,1}gradoppattern.cpp): the base's gradient is zero where
    the exponent is zero, the exponent's where the base is zero and the exponent is neither
    negative nor NaN (TensorFlow's own gradients give NaN there)."""
    shape = tf.broadcast_dynamic_shape(tf.shape(base), tf.shape(exponent))

    @tf.custom_gradient
    def power(base: tf.Tensor, exponent: tf.Tensor):
        output = tf.pow(base, exponent)

        def gradient(upstream: tf.Tensor):
            zeros = tf.zeros_like(output)
            d_base = upstream * exponent * tf.pow(base, exponent - 1)
            d_base = tf.where(tf.equal(exponent, 0), zeros, d_base)
            negative_or_nan = tf.logical_or(exponent < 0, tf.math.is_nan(exponent))
            zero_base = tf.logical_and(tf.equal(base, 0), tf.logical_not(negative_or_nan))
            d_exponent = upstream * tf.where(zero_base, zeros, output * tf.math.log(base))
            return d_base, d_exponent

        return output, gradient

    return power(tf.broadcast_to(base, shape), tf.broadcast_to(exponent, shape))


# Mod-28 defines fmod=0 on floats (floor division, with IEEE special cases): floormod computes
# it, as the onnx conformance cases test_mod_float_edge_cases_fmod_0_* check.
@register_op("Mod", since=(10, 13, 28))
class Mod(BinaryOp):
    def setup(self) -> None:
        if self.attrs.fmod not in (0, 1):
            self.bad_attribute("fmod", f"must be 0 or 1, not {self.attrs.fmod}")

    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        if self.attrs.fmod == 1:
            return truncated_remainder(a, b)
        return widened(tf.math.floormod, a, b)


class VariadicOp(Op):
    """Folds a broadcasting binary op over one or more inputs."""

    elementwise = True

    def compute(self, *inputs: tf.Tensor) -> tf.Tensor:
        return functools.reduce(self.combine, inputs)

    def combine(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError


def nan_propagating(function: Callable, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """Max or Min where a NaN operand gives NaN, as in onnxruntime and onnx's reference
    (numpy's maximum); TensorFlow's CPU kernels return the other operand."""
    result = widened(function, a, b)
    if not result.dtype.is_floating:
        return result
    a, b = tf.cast(a, result.dtype), tf.cast(b, result.dtype)
    nan = tf.constant(float("nan"), result.dtype)
    return tf.where(tf.math.is_nan(a) | tf.math.is_nan(b), nan, result)


@register_op("Max", since=(1, 6, 8, 12, 13))
class Max(VariadicOp):
    def combine(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return nan_propagating(tf.maximum, a, b)


@register_op("Min", since=(1, 6, 8, 12, 13))
class Min(VariadicOp):
    def combine(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return nan_propagating(tf.minimum, a, b)


@register_op("Sum", since=(1, 6, 8, 13))
class Sum(VariadicOp):
    def combine(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return widened(tf.add, a, b)


@register_op("Mean", since=(1, 6, 8, 13))
class Mean(VariadicOp):
    def compute(self, *inputs: tf.Tensor) -> tf.Tensor:
        total = functools.reduce(tf.add, inputs)
        return total / tf.cast(len(inputs), total.dtype)


@register_op("BitShift", since=11)
class BitShift(BinaryOp):
    def setup(self) -> None:
        if self.attrs.direction not in ("LEFT", "RIGHT"):
            self.bad_attribute("direction", f"must be LEFT or RIGHT, not {self.attrs.direction!r}")

    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        # Shifts by a negative amount or by the bit width or more give 0 (-1 for a negative
        # value shifted right), rather than C's undefined behaviour.
        width = a.dtype.size * 8
        out_of_range = tf.logical_or(b < 0, b >= width)
        safe_b = tf.where(out_of_range, tf.zeros_like(b), b)
        if self.attrs.direction == "LEFT":
            shifted = tf.bitwise.left_shift(a, safe_b)
            overflow = tf.zeros_like(shifted)
        else:
            shifted = tf.bitwise.right_shift(a, safe_b)
            overflow = (
                tf.where(a < 0, -tf.ones_like(a), tf.zeros_like(a))
                if not a.dtype.is_unsigned
                else tf.zeros_like(a)
            )
        overflow = tf.broadcast_to(overflow, tf.shape(shifted))
        return tf.where(out_of_range, overflow, shifted)


@register_op("BitwiseAnd", since=18)
class BitwiseAnd(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.bitwise.bitwise_and(a, b)


@register_op("BitwiseOr", since=18)
class BitwiseOr(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.bitwise.bitwise_or(a, b)


@register_op("BitwiseXor", since=18)
class BitwiseXor(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.bitwise.bitwise_xor(a, b)


@register_op("BitwiseNot", since=18)
class BitwiseNot(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.bitwise.invert(x)
