"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/fifo_test.py`.

`ipu.internal_ops.fifo` in loops compiled for the IPU: a value enters a FIFO of depth 5 and
comes out 5 iterations later (zeros before), also with the FIFO offloaded, between an
infeed and two outfeeds. `testFifoMultiDevice` checks, in Poplar's execution report, that a
sharded FIFO exchanges nothing between IPUs; only the original's backend writes that report.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu

v1 = tf.compat.v1


@pytest.fixture
def configure(tf1_graph):
    def configure_system():
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = 1
        config.configure_ipu_system()

    yield configure_system
    ipu.config.reset_ipu_configuration()


def _fifo_loop(configure, iterations):
    def my_net(x):
        return ipu.loops.repeat(iterations, lambda z: ipu.internal_ops.fifo(z, 5), [x])

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        x = v1.placeholder(np.float32, shape=[2])
        run_loop = ipu.ipu_compiler.compile(my_net, inputs=[x])
    configure()
    with tu.ipu_session() as sess:
        sess.run(v1.global_variables_initializer())
        return sess.run(run_loop, {x: np.ones([2])})


@pytest.mark.follows("testFifoCompleteLoop")
def test_fifo_complete_loop(configure):
    # Iteration 6 reads what iteration 1 wrote.
    np.testing.assert_allclose(_fifo_loop(configure, 6), np.ones([1, 2]))


@pytest.mark.follows("testFifo")
def test_fifo(configure):
    np.testing.assert_allclose(_fifo_loop(configure, 3), np.zeros([1, 2]))


@pytest.mark.follows("testOffloaded")
def test_offloaded(configure):
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tu.create_single_increasing_dataset(10, shape=[1])
    )
    outfeed_queue1 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    outfeed_queue2 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        x1 = ipu.internal_ops.fifo(x, 5, offload=True)
        x2 = ipu.internal_ops.fifo(x, 1, offload=True)
        return outfeed_queue1.enqueue(x1), outfeed_queue2.enqueue(x2)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run_loop = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(10, body, [], infeed_queue), inputs=[]
        )
    dequeue_outfeed1 = outfeed_queue1.dequeue()
    dequeue_outfeed2 = outfeed_queue2.dequeue()
    configure()
    with tu.ipu_session() as sess:
        sess.run(infeed_queue.initializer)
        sess.run(run_loop)
        result1 = sess.run(dequeue_outfeed1)
        result2 = sess.run(dequeue_outfeed2)
    assert len(result1) == 10 and len(result2) == 10
    np.testing.assert_allclose(result1[5:], [[x] for x in range(5)])
    np.testing.assert_allclose(result2[1:], [[x] for x in range(9)])
