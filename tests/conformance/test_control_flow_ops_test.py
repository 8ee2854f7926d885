"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/control_flow_ops_test.py`.

`control_flow_ops.barrier` between two products and the rest of a computation, with and
without a barrier for the gradients: values and gradients are unchanged (the original's
numbers, recomputed: loss = sum((12 a) @ (2 b)) over ones, so 768; d/da = 12 * 2 * 8 = 192
per element, d/db = 12 * 2 * 2 = 48).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1


@pytest.mark.follows("test_barrier")
@pytest.mark.parametrize("gradients_barrier", [True, False])
def test_barrier(tf1_graph, gradients_barrier):
    a_val = tf.ones([2, 2])
    b_val = tf.ones([2, 8])

    def model_fn():
        a_var = v1.get_variable("a", initializer=a_val)
        b_var = v1.get_variable("b", initializer=b_val)
        a, b = ipu.control_flow_ops.barrier(
            [a_var * 4, b_var * 2], insert_barrier_for_gradients=gradients_barrier
        )
        a = a + a_var * 8
        loss = tf.reduce_sum(a @ b)
        return [*tf.gradients(loss, [a_var, b_var]), loss]

    with v1.Session(graph=tf1_graph) as sess:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            with v1.variable_scope("vs", use_resource=True):
                output = ipu.ipu_compiler.compile(model_fn, [])
        ipu.utils.move_variable_initialization_to_cpu()
        sess.run(v1.global_variables_initializer())
        x = sess.run(output)
    np.testing.assert_allclose(x[0], np.full([2, 2], 192))
    np.testing.assert_allclose(x[1], np.full([2, 8], 48))
    np.testing.assert_allclose(x[2], 768.0)
