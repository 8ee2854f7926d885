"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/replicated_reduce_scatter_test.py`.

`reduce_scatter` over 4 replicas of inputs whose lengths (1 to 5) are not all multiples
of the replica count: each replica's part is outfed; read back and flattened, each
input's parts hold its length padded up to a multiple of 4, and start with the replicas'
sum (ADD: 4 times the input, every replica holds the same) or mean (MEAN: the input).
The program is built before `configure_ipu_system`, as in the original.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

REPLICAS = 4


@pytest.mark.parametrize("op, scale", [("COLLECTIVE_OP_ADD", 4), ("COLLECTIVE_OP_MEAN", 1)])
@pytest.mark.follows("test_reduce_scatter")
def test_reduce_scatter(tf1_graph, op, scale):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_net(*xs):
        return outfeed.enqueue(
            [ipu.ops.reduce_scatter_op.reduce_scatter(x, REPLICAS, op=op) for x in xs]
        )

    inputs = [i * np.arange(i, dtype=np.float32) for i in range(1, 6)]
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(my_net, inputs=inputs)
    with tf.device("/device:CPU:0"):
        gathered = [tf.reshape(part, [-1]) for part in outfeed.dequeue()]

    config = ipu.config.IPUConfig()
    config.optimizations.maximum_reduce_scatter_buffer_size = 10000
    config.auto_select_ipus = REPLICAS
    config.configure_ipu_system()
    try:
        with tf.compat.v1.Session(graph=tf1_graph) as sess:
            sess.run(compiled)
            out = sess.run(gathered)
    finally:
        ipu.config.reset_ipu_configuration()

    for i, value in enumerate(out, start=1):
        assert len(value) == np.ceil(i / REPLICAS) * REPLICAS
        np.testing.assert_array_equal(value[:i], i * scale * np.arange(i, dtype=np.float32))
