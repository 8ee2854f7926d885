"""Comparisons, boolean logic and Where."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.ops.elementwise import BinaryOp
from openipu._src.popart.lowering.registry import register_op


@register_op("And", since=(1, 7))
class And(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.logical_and(a, b)


@register_op("Or", since=(1, 7))
class Or(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.logical_or(a, b)


@register_op("Xor", since=(1, 7))
class Xor(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.math.logical_xor(a, b)


@register_op("Not", since=1)
class Not(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.logical_not(x)


@register_op("Equal", since=(1, 7, 11, 13, 19))
class Equal(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.equal(a, b)


@register_op("Greater", since=(1, 7, 9, 13))
class Greater(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.greater(a, b)


@register_op("Less", since=(1, 7, 9, 13))
class Less(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.less(a, b)


@register_op("GreaterOrEqual", since=(12, 16))
class GreaterOrEqual(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.greater_equal(a, b)


@register_op("LessOrEqual", since=(12, 16))
class LessOrEqual(BinaryOp):
    def apply(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.less_equal(a, b)


@register_op("Where", since=(9, 16))
class Where(Op):
    def compute(self, condition: tf.Tensor, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return tf.where(condition, x, y)
