"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/replicated_index_test.py`.

Each of 2 replicas slices its own element of the input by `replication_index()`; the
cross-replica sum of the slices is the sum of the input, 2 + 4 = 6. The program is
built before the system is configured, as in the original (the IPU device scope inside
the computation). The second test is the same scenario with `compile` inside an
`ipu_scope`.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _sum_of_slices(tf1_graph, compile_in_ipu_scope: bool):
    def my_graph(inp):
        with tf.device("/device:IPU:0"):
            idx = ipu.replication_ops.replication_index()
            x = tf.slice(inp, [idx], [1])
            return ipu.cross_replica_ops.cross_replica_sum(x)

    with tf.device("cpu"):
        inp = tf.compat.v1.placeholder(np.float32, [2], name="data")
    if compile_in_ipu_scope:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            out = ipu.ipu_compiler.compile(my_graph, [inp])
    else:
        out = ipu.ipu_compiler.compile(my_graph, [inp])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    try:
        with tf.compat.v1.Session(graph=tf1_graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return sess.run(out, {inp: [2, 4]})
    finally:
        ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testReplicatedIndex")
def test_replicated_index(tf1_graph):
    np.testing.assert_allclose(_sum_of_slices(tf1_graph, compile_in_ipu_scope=False)[0], [6.0])


@pytest.mark.follows("testReplicatedIndex")
def test_replicated_index_in_ipu_scope(tf1_graph):
    np.testing.assert_allclose(_sum_of_slices(tf1_graph, compile_in_ipu_scope=True)[0], [6.0])
