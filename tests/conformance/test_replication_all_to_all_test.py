"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/replication_all_to_all_test.py`.

Collectives over 8 replicas in TF1 programs built before `configure_ipu_system`, with
the IPU device scope inside the computation (as the original): an all-gather of each
replica's input plus its replication index, and an all-to-all exchange; each replica's
result is outfed. The original calls the generated ops (`gen_popops_ops.ipu_all_gather`,
`ipu_all_to_all`); the public `all_to_all_op` functions are the same ops. The
shape-inference and multi-update-add scenarios call the generated op modules
(`tensorflow.compiler.plugin.poplar.ops`) as the original does.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1
REPLICAS = 8


def _run_replicated(tf1_graph, my_graph, x_value):
    with tf.device("cpu"):
        x = v1.placeholder(np.float32, shape=[8])
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    out = ipu.ipu_compiler.compile(lambda x: my_graph(x, outfeed), [x])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [REPLICAS]
    config.configure_ipu_system()
    try:
        dequeued = outfeed.dequeue()
        with v1.Session(graph=tf1_graph) as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(out, {x: x_value})
            return sess.run(dequeued)[0]
    finally:
        ipu.config.reset_ipu_configuration()


def _replica_index_as_float():
    return tf.cast(ipu.replication_ops.replication_index(), np.float32)


@pytest.mark.follows("testAllGather")
def test_all_gather(tf1_graph):
    def my_graph(x, outfeed):
        with tf.device("/device:IPU:0"):
            (y,) = ipu.ops.all_to_all_op.all_gather([x + _replica_index_as_float()], REPLICAS)
            return y, outfeed.enqueue(y)

    result = _run_replicated(tf1_graph, my_graph, np.zeros([8]))
    # Every replica gathers every replica's input: row r is replica r's index.
    expected = np.repeat(np.arange(REPLICAS, dtype=np.float32)[:, None], 8, axis=1)
    assert result.shape == (REPLICAS, REPLICAS, 8)
    for replica in range(REPLICAS):
        np.testing.assert_array_equal(result[replica], expected)


@pytest.mark.follows("testAllGatherShapeInference")
def test_all_gather_shape_inference(tf1_graph):
    from tensorflow.compiler.plugin.poplar.ops import gen_popops_ops

    x = v1.placeholder(np.float32, shape=(2, 4))
    (y,) = gen_popops_ops.ipu_all_gather([x], replication_factor=8)
    assert y.shape == (8, 2, 4)


@pytest.mark.follows("testSerializedMultiUpdateAdd")
def test_serialized_multi_update_add(tf1_graph):
    from tensorflow.compiler.plugin.poplar.ops import gen_popops_ops, gen_poputil_ops

    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_graph(idx, updates, scale):
        zeros = tf.broadcast_to(0.0, shape=[1000, 128])
        out = gen_popops_ops.ipu_multi_update_add(zeros, updates=updates, indices=idx, scale=scale)
        out = gen_popops_ops.ipu_cross_replica_sum(out)
        out = gen_poputil_ops.ipu_replication_normalise(out)
        return out, outfeed.enqueue(out)

    with tf.device("cpu"):
        idx = v1.placeholder(np.int32, shape=[16])
        updates = v1.placeholder(np.float32, shape=[16, 128])
        scale = v1.placeholder(np.float32, shape=[])
    with tf.device("/device:IPU:0"):
        out = ipu.ipu_compiler.compile(my_graph, [idx, updates, scale])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [REPLICAS]
    config.configure_ipu_system()
    indices = [1, 2, 3, 4, 1, 2, 3, 4, 10, 20, 30, 40, 100, 200, 300, 400]
    try:
        dequeued = outfeed.dequeue()
        with v1.Session(graph=tf1_graph) as sess:
            sess.run(out, {idx: indices, updates: np.ones([16, 128]), scale: 2})
            result = sess.run(dequeued)[0]
    finally:
        ipu.config.reset_ipu_configuration()
    # Every replica adds 2 x ones at each index; the normalised sum over replicas is the same.
    expected = np.zeros([1000, 128], np.float32)
    np.add.at(expected, indices, 2.0)
    assert result.shape == (REPLICAS, 1000, 128)
    for replica in range(REPLICAS):
        np.testing.assert_array_equal(result[replica], expected)


@pytest.mark.follows("testAllToAll")
def test_all_to_all(tf1_graph):
    def my_graph(x, outfeed):
        with tf.device("/device:IPU:0"):
            x = x + 8.0 * _replica_index_as_float()
            y = ipu.ops.all_to_all_op.all_to_all(x, 0, 0, REPLICAS)
            return y, outfeed.enqueue(y)

    result = _run_replicated(tf1_graph, my_graph, np.arange(1, 9))
    # Replica r holds 8r + [1..8]; it receives element r of every replica's input.
    sent = np.arange(1, 9)[None, :] + 8 * np.arange(REPLICAS)[:, None]
    np.testing.assert_array_equal(result, sent.T)
