"""`ipu.vertex_edsl`: expressions lower to the original's C++ source, and its helpers work in
`codelet_expression_op`, which openipu evaluates on tensors (checked against numpy)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import vertex_edsl as edsl


def test_expressions_lower_to_cpp_source():
    x = edsl.PlaceholderVertexExpr("in0", edsl.Float32())
    y = edsl.PlaceholderVertexExpr("in1", edsl.Float32())
    source = edsl.DefaultNameSource()
    assert (abs(x) * y + edsl.constant(2.0)).lower(source) == "(((std::abs(in0) )*in1)+(2.0))"
    assert (-x).lower(source) == "((0)-in0)"
    let = edsl.let(x * x, lambda v: v + v)
    assert let.lower(source) == "[&, var0=(in0*in0)]{return (var0+var0);}()"
    assert edsl.condition(x, y, x).lower(source) == "((in0) ? (in1) : (in0))"
    assert edsl.Sequence(edsl.Int16()).getElementType() == edsl.BaseType.Int16
    assert edsl.constant(3).getType().getType() == edsl.BaseType.Int32


def test_helpers_in_a_codelet_expression_op(ipu_system):
    a = np.array([-2.0, 0.5, 3.0], np.float32)
    b = np.array([1.0, -1.0, 2.0], np.float32)

    def expression(x, y):
        squared = edsl.let(x * y, lambda p: p * p)
        return edsl.condition(x > 0, squared + edsl.constant(1.0), edsl.constant(2.0) * y)

    @tf.function(jit_compile=True)
    def program(x, y):
        return ipu.custom_ops.codelet_expression_op(expression, x, y)

    result = ipu.ipu_strategy.IPUStrategy().run(program, args=(a, b))
    np.testing.assert_allclose(result, np.where(a > 0, (a * b) ** 2 + 1.0, 2.0 * b))
