"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/reductions_test.py`.

A float16 mean of large values (half the largest float16) on a plain `/device:IPU:0` with
every floating-point exception enabled: it neither overflows nor raises.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu

v1 = tf.compat.v1


@pytest.mark.follows("testReduceMean")
def test_reduce_mean(tf1_graph):
    shape = [2, 10000]
    with tf.device("/device:IPU:0"):
        pa = v1.placeholder(np.float16, shape)
        output = tf.reduce_mean(pa, axis=[1])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [1]
    config.floating_point_behaviour.inv = True
    config.floating_point_behaviour.div0 = True
    config.floating_point_behaviour.oflo = True
    config.floating_point_behaviour.esr = ipu.config.StochasticRoundingBehaviour.ON
    config.floating_point_behaviour.nanoo = True
    config.configure_ipu_system()
    try:
        with tu.ipu_session() as sess:
            val = np.finfo(np.float16).max / 2
            result = sess.run(output, {pa: np.full(shape, val)})
    finally:
        ipu.config.reset_ipu_configuration()
    np.testing.assert_allclose(result, np.full([2], val), rtol=1e-3)
