"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/gcl_test.py`.

Sharded programs with I/O tiles reserved: two matmuls on two IPUs between an infeed
and an outfeed give numpy's results (the original checks that no tensor is mapped to
the I/O tiles, a Poplar tensor map the emulated IPUs do not have); a replicated and
sharded program sums each replica's index plus its input across the replicas.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compat import v1
from tensorflow.python import ipu


@pytest.fixture(autouse=True)
def reset():
    yield
    ipu.config.reset_ipu_configuration()


def _configure(ipus):
    config = ipu.config.IPUConfig()
    config.io_tiles.num_io_tiles = 128
    config.io_tiles.place_ops_on_io_tiles = True
    config.auto_select_ipus = ipus
    config.configure_ipu_system()


@pytest.mark.follows("testIoTilesAreExcludedFromShard")
def test_io_tiles_are_excluded_from_shard(tf1_graph):
    rng = np.random.RandomState(0)
    a = rng.rand(64, 1).astype(np.float32)
    b = rng.rand(64, 1).astype(np.float32)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensors((a, b)))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_net():
        with ipu.scopes.ipu_shard(0):
            x, y = infeed._dequeue()  # noqa: SLF001 - the original's test dequeues directly
            xx = tf.matmul(x, x, transpose_b=True, name="aa")
        with ipu.scopes.ipu_shard(1):
            yy = tf.matmul(y, y, transpose_b=True, name="bb")
            return outfeed.enqueue((xx, yy))

    with tf.device("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(my_net, inputs=[])
    _configure(2)
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(compiled)
        aa, bb = sess.run(dequeued)
    np.testing.assert_allclose(aa[0], a @ a.T, rtol=1e-6)
    np.testing.assert_allclose(bb[0], b @ b.T, rtol=1e-6)


@pytest.mark.follows("testReplicated")
def test_replicated(tf1_graph):
    replicas, shards = 2, 2

    def my_model(x):
        with ipu.scopes.ipu_shard(0):
            index = ipu.ops.replication_ops.replication_index()
            y = x + tf.cast(index, np.float32)
        with ipu.scopes.ipu_shard(1):
            return ipu.ops.cross_replica_ops.cross_replica_sum(y, name="my_all_reduce")

    inputs = v1.placeholder(np.float32, shape=[])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(my_model, [inputs])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = replicas * shards
    config.io_tiles.num_io_tiles = 128
    config.configure_ipu_system()
    with v1.Session() as sess:
        [result] = sess.run(compiled, {inputs: 1.0})
    # Each replica adds its index (0, 1) to 1.0; the sum over the replicas is 1 + 2.
    assert result == sum(range(1, replicas + 1))
