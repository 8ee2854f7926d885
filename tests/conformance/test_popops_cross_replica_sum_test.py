"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/popops_cross_replica_sum_test.py`.

A cross-replica sum placed on an IPU outside any compiled program (one replica) is the
identity.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


@pytest.mark.follows("testCrossReplicaSumOp")
def test_cross_replica_sum_op(tf1_graph, ipu_system):
    with tf1_graph.device("/device:IPU:0"):
        t1 = tf.random.uniform([1000], dtype=tf.float32)
        t2 = ipu.ops.cross_replica_ops.cross_replica_sum(t1, name="crs")
    with tf.compat.v1.Session(graph=tf1_graph) as sess:
        h1, h2 = sess.run([t1, t2])
    np.testing.assert_array_equal(h1, h2)
