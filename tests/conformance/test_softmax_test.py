"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/softmax_test.py`.

`ipu.ops.nn_ops.softmax`, stable and not, on a plain `/device:IPU:0` in a TF1 session:
its values against numpy and its gradient against `tf.nn.softmax`'s.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.ops import nn_ops

v1 = tf.compat.v1


@pytest.fixture
def configured(tf1_graph):
    config = ipu.config.IPUConfig()
    config.ipu_model.compile_ipu_code = False
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testSoftmax")
@pytest.mark.parametrize("stable", [True, False], ids=["Stable", "Unstable"])
def test_softmax(configured, stable):
    i_h = np.linspace(-10, 10, 100, dtype="float32")
    ex = np.exp(i_h - np.max(i_h))
    with v1.Session() as sess:
        with tf.device("/device:IPU:0"):
            i = v1.placeholder(np.float32, shape=[100])
            result = sess.run(nn_ops.softmax(i, stable=stable), {i: i_h})
    np.testing.assert_allclose(result, ex / np.sum(ex), rtol=1e-5, atol=1e-7)


@pytest.mark.follows("testSoftmaxGrad")
@pytest.mark.parametrize("stable", [True, False], ids=["Stable", "Unstable"])
def test_softmax_grad(configured, stable):
    x_h = np.linspace(-10, 10, 100, dtype="float32")
    with v1.Session() as sess:
        with tf.device("/device:IPU:0"):
            x = v1.placeholder(np.float32, shape=[100])
            x_grad = tf.gradients(nn_ops.softmax(x, stable=stable), x)
            x_grad_ref = tf.gradients(tf.nn.softmax(x), x)
            got, expected = sess.run((x_grad, x_grad_ref), {x: x_h})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
