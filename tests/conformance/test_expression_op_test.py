"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/expression_op_test.py`.

`ipu.custom_ops.codelet_expression_op` turns a Python function of its inputs
(arithmetic, `abs`) into an elementwise operation on the IPU, broadcasting its inputs:
the results are the function applied by numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow.compat import v1
from tensorflow.python import ipu


@pytest.mark.follows("testCodeletExpressionOp")
def test_codelet_expression_op(tf1_graph):
    def my_custom_op_1(x, y, z):
        return x * x + y * z

    def my_custom_op_2(x):
        return abs(x)

    def my_net(a, b, c):
        out1 = ipu.custom_ops.codelet_expression_op(my_custom_op_1, a, b, c)
        out2 = ipu.custom_ops.codelet_expression_op(my_custom_op_2, a)
        return [out1, out2]

    with v1.device("cpu"):
        a = v1.placeholder(np.float32, [8, 1])
        b = v1.placeholder(np.float32, [1])
        c = v1.placeholder(np.float32, [1, 8])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(my_net, inputs=[a, b, c])

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    try:
        a_h = np.arange(-4, 4).reshape([8, 1]).astype(np.float32)
        b_h = np.array([3.0], np.float32)
        c_h = np.arange(0, 8).reshape([1, 8]).astype(np.float32)
        with v1.Session() as sess:
            result = sess.run(r, {a: a_h, b: b_h, c: c_h})
    finally:
        ipu.config.reset_ipu_configuration()
    np.testing.assert_allclose(result[0], a_h * a_h + b_h * c_h)
    np.testing.assert_allclose(result[1], np.abs(a_h))
