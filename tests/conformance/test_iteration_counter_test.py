"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/iteration_counter_test.py`.

`internal_ops.get_current_iteration_counter()` in two pipeline stages on one IPU: each
outfed counter is the iteration's index within its gradient-accumulation count (0 to 9,
for each of 3 repeats), the same in both stages.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

GA_COUNT = 10
REPEATS = 3


@pytest.mark.follows("testIterationCounter")
def test_iteration_counter(tf1_graph):
    dataset = tf.data.Dataset.range(GA_COUNT * REPEATS).map(lambda i: tf.cast(i, np.int32))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(1, drop_remainder=True))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def stage1(x):
        return x, ipu.internal_ops.get_current_iteration_counter()

    def stage2(x, c1):
        return x, c1, ipu.internal_ops.get_current_iteration_counter()

    def my_net():
        return ipu.pipelining_ops.pipeline(
            [stage1, stage2],
            gradient_accumulation_count=GA_COUNT,
            repeat_count=REPEATS,
            infeed_queue=infeed,
            outfeed_queue=outfeed,
            device_mapping=[0, 0],
        )

    with tf.device("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(my_net, inputs=[])
    dequeue = outfeed.dequeue()
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    try:
        with tf.compat.v1.Session(graph=tf1_graph) as sess:
            sess.run(infeed.initializer)
            sess.run(r)
            x, c1, c2 = sess.run(dequeue)
    finally:
        ipu.config.reset_ipu_configuration()
    np.testing.assert_array_equal(np.ravel(x), np.arange(GA_COUNT * REPEATS))
    np.testing.assert_array_equal(c1, c2)
    np.testing.assert_array_equal(c1, np.tile(np.arange(GA_COUNT), REPEATS))
