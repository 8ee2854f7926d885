"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/random_constant_matmul_test.py`.

A compiled TF1 program adding a `random_uniform` matrix (no variable, no seed: a
random constant of the program) to a matmul of fed placeholders runs in an IPU
session; the result is the matmul plus values in [0, 1).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compat import v1
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu


@pytest.mark.follows("testRandomConstant")
def test_random_constant(tf1_graph):
    def my_net(x, w):
        b = tf.random.uniform([2, 2])
        return tf.matmul(x, w) + b

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        x = v1.placeholder(np.float32, shape=[2, 3])
        w = v1.placeholder(np.float32, shape=[3, 2])
        run_loop = ipu.ipu_compiler.compile(my_net, inputs=[x, w])

    with tu.ipu_session() as sess:
        sess.run(v1.global_variables_initializer())
        (result,) = sess.run(run_loop, {x: np.ones([2, 3]), w: np.ones([3, 2])})
    noise = result - 3.0
    assert result.shape == (2, 2)
    assert ((noise >= 0.0) & (noise < 1.0)).all()
