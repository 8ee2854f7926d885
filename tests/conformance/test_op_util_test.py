"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/op_util_test.py`.

`ipu.ops.op_util.accumulate_gradients` gives each variable an accumulated gradient of
its own dtype, for variables alternating between float16 and float32 (and, outside a
gradient accumulation loop, of the gradient's value).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compat import v1
from tensorflow.python import ipu


@pytest.mark.follows("testAccumulateGradients")
def test_accumulate_gradients(tf1_graph):
    x = tf.constant(1.0, shape=[3, 3])
    for i in range(4):
        w = v1.get_variable(
            name=f"matmul{i}/w",
            shape=[3, 3],
            dtype=tf.float16 if i % 2 == 0 else tf.float32,
            initializer=v1.ones_initializer(),
        )
        x = tf.matmul(tf.cast(x, w.dtype), w)
    grads_and_vars = v1.train.GradientDescentOptimizer(0.1).compute_gradients(x)
    accumulated = ipu.ops.op_util.accumulate_gradients(grads_and_vars, None)
    assert len(accumulated) == 4
    for (grad, var), (_given, original_var) in zip(accumulated, grads_and_vars, strict=True):
        assert var is original_var
        assert grad.dtype.base_dtype == var.dtype.base_dtype
    # Outside a gradient accumulation loop the accumulation is of one micro-batch: the
    # gradient itself (reference: the gradients compute_gradients gave).
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        got, want = sess.run(([g for g, _ in accumulated], [g for g, _ in grads_and_vars]))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
