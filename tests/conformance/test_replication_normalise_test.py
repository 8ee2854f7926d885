"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/replication_normalise_test.py`.

`ipu_replication_normalise`, a TF1 op placed on a device of 2 IPUs with `tf.device` (outside
any compiled program, as the original's test), divides by that device's replica count (2):
ones become 0.5, and the input is not changed in place (x + normalise(x) is 1.5). The original also lists the
compute sets of the profile; that part awaits the cost model.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _run(tf1_graph, fn):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.device_connection.enable_remote_buffers = True
    config.device_connection.type = ipu.utils.DeviceConnectionType.ON_DEMAND
    config.configure_ipu_system()
    try:
        with tf.device("/device:IPU:0"):
            x = tf.compat.v1.placeholder(np.float32, shape=[1, 4, 4, 2])
            y = fn(x)
        with tf.compat.v1.Session(graph=tf1_graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return sess.run(y, {x: np.ones([1, 4, 4, 2])})
    finally:
        ipu.config.reset_ipu_configuration()


def _normalise(x):
    from tensorflow.compiler.plugin.poplar.ops import gen_poputil_ops

    return gen_poputil_ops.ipu_replication_normalise(x)


@pytest.mark.follows("testReplicationNormalise")
def test_replication_normalise(tf1_graph):
    np.testing.assert_allclose(_run(tf1_graph, _normalise), np.full([1, 4, 4, 2], 0.5))


@pytest.mark.follows("testReplicationNormaliseNotInplace")
def test_replication_normalise_not_inplace(tf1_graph):
    np.testing.assert_allclose(
        _run(tf1_graph, lambda x: _normalise(x) + x), np.full([1, 4, 4, 2], 1.5)
    )
