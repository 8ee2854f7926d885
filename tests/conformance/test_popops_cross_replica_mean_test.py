"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/popops_cross_replica_mean_test.py`.

`cross_replica_mean` over 4 replicas in a TF1 program fed by an infeed, against the
original's numpy reference (rows of the input are the replicas' values; each replica
gets the mean of all rows, accumulated in float64), including float16 values at
65504 whose sum overflows float16 but whose mean does not.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _reference_mean(data: np.ndarray) -> np.ndarray:
    mean = data.astype(np.float64).mean(axis=0)
    return np.tile(mean, (data.shape[0], 1)).astype(data.dtype)


def _run(values: np.ndarray) -> np.ndarray:
    graph = tf.Graph()
    with graph.as_default():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(values))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def body(x):
            return outfeed.enqueue(ipu.ops.cross_replica_ops.cross_replica_mean(x, None))

        def model():
            return ipu.loops.repeat(1, body, [], infeed)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            compiled = ipu.ipu_compiler.compile(model)
        outfed = outfeed.dequeue()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(infeed.initializer)
            sess.run(compiled)
            return sess.run(outfed)[0]


@pytest.mark.follows("test")
@pytest.mark.parametrize("ipu_system", [4], indirect=True)
@pytest.mark.parametrize("case", ["Simple", "Overflow"])
def test_cross_replica_mean(ipu_system, case):
    if case == "Simple":
        values = np.arange(16, dtype=np.float32).reshape(4, 4)
    else:
        values = np.full((4, 4), 65504, np.float16)
    result = _run(values)
    np.testing.assert_allclose(result, _reference_mean(values))
    if case == "Simple":  # the mean of the replicas' rows 0..3, 4..7, 8..11, 12..15
        np.testing.assert_array_equal(result[0], [6, 7, 8, 9])
