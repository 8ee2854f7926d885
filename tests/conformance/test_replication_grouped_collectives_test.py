"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/replication_grouped_collectives_test.py`.

Collectives within groups of 1, 2 and 4 of 4 replicas (reduce-scatter, all-gather,
cross-replica sum), each replica reading its own row of a 4 x 4 input from an infeed,
checked against numpy sums and slices of the rows; and a group size (3) that does not
divide the replica count, refused with the original's InvalidArgumentError when the
program runs. The programs are built before `configure_ipu_system`, as the original's.
(The original skips this file's class, "T42121 - currently not supported".)
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

REPLICAS = 4
GROUP_SIZES = [1, 2, 4]
INPUTS = np.array(
    [[0.0, 0.0, 1.0, 2.0], [0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0]],
    dtype=np.float32,
)


def _run_collective_ops(tf1_graph, inputs, collective_ops):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(inputs))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_loop():
        return ipu.loops.repeat(
            1, lambda x: outfeed.enqueue(collective_ops(x)), infeed_queue=infeed
        )

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(my_loop)
    dequeued = outfeed.dequeue()
    config = ipu.config.IPUConfig()
    config.optimizations.maximum_reduce_scatter_buffer_size = 10000
    config.auto_select_ipus = REPLICAS
    config.configure_ipu_system()
    try:
        with tf.compat.v1.Session(graph=tf1_graph) as sess:
            sess.run(infeed.initializer)
            sess.run(compiled)
            return [output[0] for output in sess.run(dequeued)]  # the one iteration
    finally:
        ipu.config.reset_ipu_configuration()


@pytest.mark.follows("test_grouped_reduce_scatter")
def test_grouped_reduce_scatter(tf1_graph):
    def collective_ops(x):
        return [ipu.ops.reduce_scatter_op.reduce_scatter(x, k) for k in GROUP_SIZES]

    size_1, size_2, size_4 = _run_collective_ops(tf1_graph, INPUTS, collective_ops)
    np.testing.assert_array_equal(size_1, INPUTS)
    # Group {0, 1} sums its rows; replica 0 keeps columns 0:2, replica 1 columns 2:4.
    for replica in range(REPLICAS):
        group = slice(replica // 2 * 2, replica // 2 * 2 + 2)
        part = slice(replica % 2 * 2, replica % 2 * 2 + 2)
        np.testing.assert_array_equal(size_2[replica], INPUTS[group, part].sum(axis=0))
        np.testing.assert_array_equal(size_4[replica], INPUTS[:, replica : replica + 1].sum(0))


@pytest.mark.follows("test_grouped_all_gather")
def test_grouped_all_gather(tf1_graph):
    def collective_ops(x):
        return [ipu.ops.all_to_all_op.all_gather(x, k) for k in GROUP_SIZES]

    size_1, size_2, size_4 = _run_collective_ops(tf1_graph, INPUTS, collective_ops)
    for replica in range(REPLICAS):
        np.testing.assert_array_equal(size_1[replica], INPUTS[replica : replica + 1])
        first = replica // 2 * 2
        np.testing.assert_array_equal(size_2[replica], INPUTS[first : first + 2])
        np.testing.assert_array_equal(size_4[replica], INPUTS)


@pytest.mark.follows("test_grouped_all_reduce")
def test_grouped_all_reduce(tf1_graph):
    def collective_ops(x):
        return [
            ipu.ops.cross_replica_ops.cross_replica_sum(x, replica_group_size=k)
            for k in GROUP_SIZES
        ]

    size_1, size_2, size_4 = _run_collective_ops(tf1_graph, INPUTS, collective_ops)
    for replica in range(REPLICAS):
        np.testing.assert_array_equal(size_1[replica], INPUTS[replica])
        first = replica // 2 * 2
        np.testing.assert_array_equal(size_2[replica], INPUTS[first : first + 2].sum(axis=0))
        np.testing.assert_array_equal(size_4[replica], INPUTS.sum(axis=0))


@pytest.mark.follows("test_invalid_group_size")
def test_invalid_group_size(tf1_graph):
    def collective_ops(x):
        return ipu.ops.cross_replica_ops.cross_replica_sum(x, replica_group_size=3)

    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"The replica group size \(got 3\) does not evenly divide the "
        r"total number of replicas \(got 4\)",
    ):
        _run_collective_ops(tf1_graph, np.eye(4, dtype=np.float32), collective_ops)
