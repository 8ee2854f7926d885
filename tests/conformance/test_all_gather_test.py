"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/all_gather_test.py`.

`all_to_all_op.all_gather` over 4 replicas in TF1 programs: each replica reads its own
batch from an infeed (the infeed's private `_dequeue()`, as the original's tests do) and
the gather reassembles the replicas' batches, for one input, several inputs (the
gathers come out per input, i.e. transposed) and inputs of mixed dtypes.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.ops.all_to_all_op import all_gather

REPLICAS = 4

pytestmark = pytest.mark.parametrize("ipu_system", [REPLICAS], indirect=True)


def _gather(tf1_graph, data, batches, split=None):
    dataset = tf.data.Dataset.from_tensor_slices(data)
    for batch in batches:
        dataset = dataset.batch(batch, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def my_net():
        x = infeed._dequeue()
        if split is None:
            return all_gather(x, REPLICAS)
        return all_gather(split(x), REPLICAS)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(my_net)
    with tf.compat.v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        return sess.run(result)


@pytest.mark.follows("testAllGatherSingleInput")
def test_all_gather_single_input(ipu_system, tf1_graph):
    data = np.arange(REPLICAS * 8, dtype=np.float32)
    (result,) = _gather(tf1_graph, data, [8])
    np.testing.assert_array_equal(result, data.reshape([REPLICAS, 8]))


@pytest.mark.follows("testAllGatherMultipleInputs")
def test_all_gather_multiple_inputs(ipu_system, tf1_graph):
    data = np.arange(REPLICAS * 32, dtype=np.float32)
    result = _gather(tf1_graph, data, [8, 4], split=lambda x: list(tf.unstack(x, axis=0)))
    expected = np.transpose(data.reshape([REPLICAS, 4, 8]), [1, 0, 2])
    np.testing.assert_array_equal(np.array(result), expected)


@pytest.mark.follows("testAllGatherMixedDtypes")
def test_all_gather_mixed_dtypes(ipu_system, tf1_graph):
    data = np.arange(REPLICAS * 16, dtype=np.float16)

    def split(x):
        x1, x2 = tf.unstack(x, axis=0)
        return [x1, tf.cast(x2, np.int32)]

    result = _gather(tf1_graph, data, [8, 2], split=split)
    expected = np.transpose(data.reshape([REPLICAS, 2, 8]), [1, 0, 2])
    np.testing.assert_array_equal(np.array(result, dtype=np.float32), expected.astype(np.float32))
    assert result[0].dtype == np.float16
    assert result[1].dtype == np.int32
