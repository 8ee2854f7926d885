"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/reduce_scatter_test.py`.

`reduce_scatter_op.reduce_scatter` (COLLECTIVE_OP_ADD) over 4 replicas in TF1 programs,
its scattered parts gathered back with `all_gather`: each replica reads its own batch
from an infeed (the infeed's private `_dequeue()`, as the original), and the result is
checked against numpy's sum over the replicas, split into one part per replica; for one
input, several inputs, and inputs of mixed dtypes (which keep their dtypes).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.ops.all_to_all_op import all_gather
from tensorflow.python.ipu.ops.reduce_scatter_op import reduce_scatter

REPLICAS = 4

pytestmark = pytest.mark.parametrize("ipu_system", [REPLICAS], indirect=True)


def _reduce_scatter_gather(tf1_graph, data, batches, split=None):
    dataset = tf.data.Dataset.from_tensor_slices(data)
    for batch in batches:
        dataset = dataset.batch(batch, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def my_net():
        x = infeed._dequeue()
        if split is None:
            return all_gather(reduce_scatter(x, REPLICAS, "COLLECTIVE_OP_ADD"), REPLICAS)
        scattered = reduce_scatter(split(x), REPLICAS, "COLLECTIVE_OP_ADD")
        return all_gather(scattered, REPLICAS)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(my_net)
    with tf.compat.v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        return sess.run(result)


def _expected(data, inputs, output_size):
    """Per input: the sum over the replicas' batches, in one part per replica."""
    per_replica = data.reshape([REPLICAS, inputs, REPLICAS * output_size])
    return per_replica.sum(axis=0).reshape([inputs, REPLICAS, output_size])


@pytest.mark.follows("testReduceScatterSingleInput")
def test_reduce_scatter_single_input(ipu_system, tf1_graph):
    output_size = 2
    # Distinct powers of 2: every sum of them is distinct.
    data = 2 ** np.arange(REPLICAS * REPLICAS * output_size, dtype=np.float32)
    (result,) = _reduce_scatter_gather(tf1_graph, data, [REPLICAS * output_size])
    np.testing.assert_array_equal(result, _expected(data, 1, output_size)[0])


@pytest.mark.follows("testReduceScatterMultipleInputs")
def test_reduce_scatter_multiple_inputs(ipu_system, tf1_graph):
    output_size, inputs = 2, 2
    data = 2 ** np.arange(REPLICAS * REPLICAS * output_size * inputs, dtype=np.float32)
    result = _reduce_scatter_gather(
        tf1_graph,
        data,
        [REPLICAS * output_size, inputs],
        split=lambda x: list(tf.unstack(x, axis=0)),
    )
    np.testing.assert_array_equal(np.array(result), _expected(data, inputs, output_size))


@pytest.mark.follows("testReduceScatterMixedDtypes")
def test_reduce_scatter_mixed_dtypes(ipu_system, tf1_graph):
    output_size, inputs = 8, 2
    rng = np.random.default_rng(seed=123)
    data = rng.integers(0, 100, dtype=np.int32, size=[REPLICAS * REPLICAS * output_size * inputs])

    def split(x):
        x1, x2 = tf.unstack(x, axis=0)
        return [x1, tf.cast(x2, np.float16)]

    result = _reduce_scatter_gather(tf1_graph, data, [REPLICAS * output_size, inputs], split)
    expected = _expected(data, inputs, output_size)
    np.testing.assert_array_equal(result[0], expected[0])
    np.testing.assert_array_equal(result[1], expected[1].astype(np.float16))
    assert result[0].dtype == np.int32
    assert result[1].dtype == np.float16
