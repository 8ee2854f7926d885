"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/outfeed_ordinal_test.py`.

Two outfeeds on two single-IPU devices (`device_ordinal` 0 and 1), each enqueued by a
program compiled for its device: each dequeue gives its own program's values.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1


@pytest.mark.follows("testTwoOutfeedsOnDifferentOrdinals")
def test_two_outfeeds_on_different_ordinals(tf1_graph):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [1, 1]
    config.configure_ipu_system()
    try:
        outfeed_1 = ipu.ipu_outfeed_queue.IPUOutfeedQueue(device_ordinal=0)
        outfeed_2 = ipu.ipu_outfeed_queue.IPUOutfeedQueue(device_ordinal=1)
        with tf.device("cpu"):
            x1 = v1.placeholder(np.float32, [1, 3])
            x2 = v1.placeholder(np.float32, [1, 4])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            res1 = ipu.ipu_compiler.compile(outfeed_1.enqueue, inputs=[x1])
        with ipu.scopes.ipu_scope("/device:IPU:1"):
            res2 = ipu.ipu_compiler.compile(outfeed_2.enqueue, inputs=[x2])
        dequeues = [outfeed_1.dequeue(), outfeed_2.dequeue()]
        with v1.Session(graph=tf1_graph) as sess:
            sess.run(res1, {x1: np.ones([1, 3])})
            sess.run(res2, {x2: np.full([1, 4], 2.0)})
            results = sess.run(dequeues)
    finally:
        ipu.config.reset_ipu_configuration()
    np.testing.assert_array_equal(results[0], np.ones([1, 1, 3]))
    np.testing.assert_array_equal(results[1], np.full([1, 1, 4], 2.0))
