"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/gelu_erf_test.py`.

The exact gelu written with `tf.math.erf`, on a plain `/device:IPU:0` in a TF1 session,
in float32 and float16, against the same formula on the CPU. The original also finds its
fused `GeluErf` compute set in Poplar's report, which only its backend writes.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from scipy import special
from tensorflow.python import ipu

v1 = tf.compat.v1


def _gelu(features):
    return (
        0.5 * features * (1.0 + tf.math.erf(features / tf.cast(1.4142135623730951, features.dtype)))
    )


@pytest.fixture
def configured(tf1_graph):
    config = ipu.config.IPUConfig()
    config.ipu_model.compile_ipu_code = False
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


def _run_gelu(dtype, tolerance):
    i_h = np.linspace(-10, 10, 1000, dtype=dtype)
    x = i_h.astype(np.float64)
    expected = 0.5 * x * (1.0 + special.erf(x / np.sqrt(2.0)))
    with v1.Session() as sess:
        with tf.device("/device:IPU:0"):
            i = v1.placeholder(dtype, shape=[1000])
            result = sess.run(_gelu(i), {i: i_h})
    np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.follows("testFP32")
def test_fp32(configured):
    _run_gelu(np.float32, 1e-6)


@pytest.mark.follows("testFP16")
def test_fp16(configured):
    _run_gelu(np.float16, 1e-3)
