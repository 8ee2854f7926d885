"""Matrix products: MatMul, Gemm, Einsum, MatMulInteger, QLinearMatMul."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.ops.quantization import requantize
from openipu._src.popart.lowering.registry import register_op

_MATMUL_DTYPES = {tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64}
_MATMUL_DTYPES |= {tf.complex64, tf.complex128}
# PopART's matrix products of half-precision operands accumulate float partials unless an
# op or the session asks for half ones (willow/src/op/matmul.cpp: MatMulPartialsType::FLOAT
# by default): their sums are those of float32 products rounded once at the end.
_FLOAT_PARTIALS = {tf.float16, tf.bfloat16}


def matmul(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """numpy.matmul semantics: 1-D operands are promoted to matrices, batch dims broadcast."""
    a_is_vector, b_is_vector = a.shape.rank == 1, b.shape.rank == 1
    if a_is_vector:
        a = a[tf.newaxis, :]
    if b_is_vector:
        b = b[:, tf.newaxis]
    dtype = a.dtype
    if dtype not in _MATMUL_DTYPES or dtype in _FLOAT_PARTIALS:
        wide = tf.int64 if dtype.is_integer else tf.float32
        result = tf.cast(tf.linalg.matmul(tf.cast(a, wide), tf.cast(b, wide)), dtype)
    else:
        result = tf.linalg.matmul(a, b)
    if a_is_vector:
        result = tf.squeeze(result, -2)
    if b_is_vector:
        result = tf.squeeze(result, -1)
    return result


@register_op("MatMul", since=(1, 9, 13))
class MatMul(Op):
    def compute(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return matmul(a, b)


@register_op("Gemm", since=(1, 6, 7, 9, 11, 13))
class Gemm(Op):
    def compute(self, a: tf.Tensor, b: tf.Tensor, c: tf.Tensor | None = None) -> tf.Tensor:
        if self.attrs.transA:
            a = tf.transpose(a)
        if self.attrs.transB:
            b = tf.transpose(b)
        product = matmul(a, b)
        alpha, beta = self.attrs.alpha, self.attrs.beta
        if alpha != 1.0:
            product = product * tf.cast(alpha, product.dtype)
        if c is None:
            return product
        if beta != 1.0:
            c = c * tf.cast(beta, c.dtype)
        if c.shape.rank == 2 and c.shape[0] == 1:
            # The same broadcast as a row vector: TensorFlow's oneDNN remapper fuses a
            # transposed MatMul and an Add of a [1, N] bias into a kernel that then refuses
            # the bias ("bias must be 1-dimensional"; TF 2.21 on AVX-512 CPUs).
            c = tf.reshape(c, [-1])
        return product + c


@register_op("Einsum", since=12)
class Einsum(Op):
    def setup(self) -> None:
        self.equation = self.attrs.equation.replace(" ", "")

    def compute(self, *operands: tf.Tensor) -> tf.Tensor:
        dtype = operands[0].dtype
        if dtype not in _MATMUL_DTYPES or dtype in _FLOAT_PARTIALS:
            wide = tf.int64 if dtype.is_integer else tf.float32
            operands = tuple(tf.cast(operand, wide) for operand in operands)
            return tf.cast(tf.einsum(self.equation, *operands), dtype)
        return tf.einsum(self.equation, *operands)


@register_op("MatMulInteger", since=10)
class MatMulInteger(Op):
    def compute(
        self,
        a: tf.Tensor,
        b: tf.Tensor,
        a_zero_point: tf.Tensor | None = None,
        b_zero_point: tf.Tensor | None = None,
    ) -> tf.Tensor:
        return matmul_integer(a, b, a_zero_point, b_zero_point)


def matmul_integer(
    a: tf.Tensor, b: tf.Tensor, a_zero_point: tf.Tensor | None, b_zero_point: tf.Tensor | None
) -> tf.Tensor:
    """The int32 product of the zero-point-shifted integer matrices."""
    a = tf.cast(a, tf.int32)
    b = tf.cast(b, tf.int32)
    if a_zero_point is not None:
        zero = tf.cast(a_zero_point, tf.int32)
        # A per-row zero point of A is a column vector against A's rows.
        a = a - (zero[:, tf.newaxis] if zero.shape.rank == 1 and zero.shape[0] != 1 else zero)
    if b_zero_point is not None:
        b = b - tf.cast(b_zero_point, tf.int32)
    return matmul(a, b)


@register_op("QLinearMatMul", since=(10, 21))
class QLinearMatMul(Op):
    """MatMulInteger of the zero-point-shifted inputs, requantized by a_scale * b_scale / y_scale.
    A 1-D a_scale is per row of A, a 1-D b_scale per column of B."""

    def compute(
        self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point=None
    ):
        accumulated = matmul_integer(a, b, a_zero_point, b_zero_point)
        if a_scale.shape.rank == 1 and a_scale.shape[0] != 1:
            a_scale = a_scale[:, tf.newaxis]
        scale = a_scale * tf.cast(b_scale, a_scale.dtype)
        dtype = a.dtype if y_zero_point is None else y_zero_point.dtype
        return requantize(accumulated, scale, y_scale, y_zero_point, dtype)
