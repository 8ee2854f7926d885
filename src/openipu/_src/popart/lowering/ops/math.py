"""Unary math functions, Clip, CumSum/CumProd, Det and the IsNaN/IsInf tests."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import normalize_axis, widened


class UnaryOp(Op):
    """An elementwise op given by one TensorFlow function."""

    elementwise = True

    function: Callable[[tf.Tensor], tf.Tensor]

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return type(self).function(x)


def unary(op_type: str, since: int | tuple[int, ...], function: Callable) -> type[UnaryOp]:
    op_class = type(op_type, (UnaryOp,), {"function": staticmethod(function), "__doc__": None})
    op_class.__module__ = __name__
    return register_op(op_type, since=since)(op_class)


def _abs(x: tf.Tensor) -> tf.Tensor:
    return x if x.dtype.is_unsigned else widened(tf.abs, x)


def _neg(x: tf.Tensor) -> tf.Tensor:
    return widened(tf.negative, x)


def _sign(x: tf.Tensor) -> tf.Tensor:
    if x.dtype.is_unsigned:
        return tf.cast(x > 0, x.dtype)
    return widened(tf.sign, x)


def _floor_if_float(function: Callable) -> Callable:
    return lambda x: function(x) if x.dtype.is_floating else x


Abs = unary("Abs", (1, 6, 13), _abs)
Neg = unary("Neg", (1, 6, 13), _neg)
Floor = unary("Floor", (1, 6, 13), _floor_if_float(tf.floor))
Ceil = unary("Ceil", (1, 6, 13), _floor_if_float(tf.math.ceil))
Round = unary("Round", (11, 22), tf.round)  # half to even, like ONNX


def _sqrt(x: tf.Tensor) -> tf.Tensor:
    """PopART takes Sqrt of integers and booleans too (synthetic_data_test.py); an integer's
    is the root truncated, a boolean is its own."""
    if x.dtype.is_floating or x.dtype.is_complex:
        return tf.sqrt(x)
    if x.dtype == tf.bool:
        return x
    return tf.cast(tf.sqrt(tf.cast(x, tf.float64)), x.dtype)


Sqrt = unary("Sqrt", (1, 6, 13), _sqrt)
Reciprocal = unary("Reciprocal", (1, 6, 13), tf.math.reciprocal)
Exp = unary("Exp", (1, 6, 13), tf.exp)
Log = unary("Log", (1, 6, 13), tf.math.log)
Sin = unary("Sin", (7, 22), tf.sin)
Cos = unary("Cos", (7, 22), tf.cos)
Tan = unary("Tan", (7, 22), tf.tan)
Asin = unary("Asin", (7, 22), tf.asin)
Acos = unary("Acos", (7, 22), tf.acos)
Atan = unary("Atan", (7, 22), tf.atan)
Sinh = unary("Sinh", (9, 22), tf.sinh)
Cosh = unary("Cosh", (9, 22), tf.cosh)
Asinh = unary("Asinh", (9, 22), tf.asinh)
Acosh = unary("Acosh", (9, 22), tf.acosh)
Atanh = unary("Atanh", (9, 22), tf.atanh)
Sign = unary("Sign", (9, 13), _sign)
Erf = unary("Erf", (9, 13), tf.math.erf)


@register_op("IsNaN", since=(9, 13, 20))
class IsNaN(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.math.is_nan(x)


@register_op("IsInf", since=(10, 20))
class IsInf(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        positive = tf.logical_and(tf.math.is_inf(x), x > 0)
        negative = tf.logical_and(tf.math.is_inf(x), x < 0)
        detect_positive, detect_negative = self.attrs.detect_positive, self.attrs.detect_negative
        if detect_positive and detect_negative:
            return tf.math.is_inf(x)
        if detect_positive:
            return positive
        if detect_negative:
            return negative
        return tf.zeros_like(x, dtype=tf.bool)


@register_op("Clip", since=(1, 6))
class ClipWithAttributes(Op):
    elementwise = True

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.clip_by_value(x, self.attrs.min, self.attrs.max)


@register_op("Clip", since=(11, 12, 13))
class Clip(Op):
    elementwise = True

    def compute(
        self, x: tf.Tensor, low: tf.Tensor | None = None, high: tf.Tensor | None = None
    ) -> tf.Tensor:
        # Not tf.clip_by_value: ONNX allows min > max (the result is then max).
        if low is not None:
            x = widened(tf.maximum, x, tf.cast(low, x.dtype))
        if high is not None:
            x = widened(tf.minimum, x, tf.cast(high, x.dtype))
        return x


class CumulativeOp(Op):
    function: Callable

    def compute(self, x: tf.Tensor, axis: tf.Tensor) -> tf.Tensor:
        axis_value = normalize_axis(self.static_ints(axis, "axis")[0], x.shape.rank)
        return widened(
            lambda value: type(self).function(
                value,
                axis=axis_value,
                exclusive=bool(self.attrs.exclusive),
                reverse=bool(self.attrs.reverse),
            ),
            x,
        )


@register_op("CumSum", since=(11, 14))
class CumSum(CumulativeOp):
    function = staticmethod(tf.math.cumsum)


@register_op("CumProd", since=26)
class CumProd(CumulativeOp):
    function = staticmethod(tf.math.cumprod)


@register_op("Det", since=(11, 22))
class Det(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.linalg.det(x)
