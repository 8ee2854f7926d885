"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/replicated_graph_test.py`.

TF1 programs compiled for 2 replicas: `cross_replica_sum` of placeholders, variables
and mixed dtypes (each replica holds the same value, so the sum doubles it), the
gradient of a summed loss, a device loop whose body sums across replicas while infeed
and outfeed carry one element per replica (plain, tuple and dict outfeeds), and a
replicated loop with no all-reduce at all. As the original, each program is built
before `configure_ipu_system` and run in a session afterwards; expected values are
the original's.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1
cross_replica_sum = ipu.ops.cross_replica_ops.cross_replica_sum
REPLICAS = 2


@pytest.fixture
def replicated(tf1_graph):
    """Configures 2 IPUs (after the test built its program, as the original does)."""

    def configure():
        config = ipu.config.IPUConfig()
        config.optimizations.maximum_cross_replica_sum_buffer_size = 10000
        config.auto_select_ipus = REPLICAS
        config.configure_ipu_system()

    yield configure
    ipu.config.reset_ipu_configuration()


def _run(graph, fetches, feed=None, initializer=None):
    with v1.Session(graph=graph) as sess:
        sess.run(v1.global_variables_initializer())
        if initializer is not None:
            sess.run(initializer)
        return sess.run(fetches, feed)


def _cpu_placeholder(dtype, shape):
    with tf.device("cpu"):
        return v1.placeholder(dtype, shape)


def _variable(name, value, dtype=np.float32, shape=(4,)):
    with v1.variable_scope("", use_resource=True):
        return v1.get_variable(
            name, dtype=dtype, shape=list(shape), initializer=v1.constant_initializer(value)
        )


@pytest.mark.follows("testCreateSimpleReplicatedGraph")
def test_create_simple_replicated_graph(tf1_graph, replicated):
    def my_graph(inp):
        with tf.device("/device:IPU:0"):
            return [cross_replica_sum(inp + inp)]

    inp = _cpu_placeholder(np.float32, [4])
    out = ipu.ipu_compiler.compile(my_graph, [inp])
    replicated()
    result = _run(tf1_graph, out, {inp: np.ones([4])})
    np.testing.assert_allclose(result[0], 4 * np.ones([4]))


@pytest.mark.follows("testReplicatedGraphWithLossAndGrad")
def test_replicated_graph_with_loss_and_grad(tf1_graph, replicated):
    def my_graph(inp):
        with tf.device("/device:IPU:0"):
            b = _variable("b", 3.0)
            loss = cross_replica_sum(inp + b)
            return [loss, tf.gradients(loss, b)]

    inp = _cpu_placeholder(np.float32, [4])
    out = ipu.ipu_compiler.compile(my_graph, [inp])
    replicated()
    loss, b_grad = _run(tf1_graph, out, {inp: np.ones([4])})
    np.testing.assert_allclose(loss, [8, 8, 8, 8])
    np.testing.assert_allclose(b_grad, [[2, 2, 2, 2]])


@pytest.mark.follows("testCrossReplicaSumDifferentTypes")
def test_cross_replica_sum_different_types(tf1_graph, replicated):
    def my_graph(x, y):
        with tf.device("/device:IPU:0"):
            return [cross_replica_sum(x + x), cross_replica_sum(y + y + 1)]

    x = _cpu_placeholder(np.float32, [4])
    y = _cpu_placeholder(np.int32, [4])
    out = ipu.ipu_compiler.compile(my_graph, [x, y])
    replicated()
    ones = np.ones([4])
    result = _run(tf1_graph, out, {x: ones, y: ones})
    np.testing.assert_allclose(result[0], 4 * ones)
    np.testing.assert_array_equal(result[1], 6 * ones)
    assert result[1].dtype == np.int32


@pytest.mark.follows("testCreateSimpleReplicatedGraphVariable")
def test_create_simple_replicated_graph_variable(tf1_graph, replicated):
    def my_graph():
        with tf.device("/device:IPU:0"):
            x = _variable("x", 10.0)
            return [cross_replica_sum(x + x)]

    out = ipu.ipu_compiler.compile(my_graph, [])
    replicated()
    result = _run(tf1_graph, out)
    np.testing.assert_allclose(result[0], np.full([4], 40.0))


SHAPE = [2]


def _increasing_infeed():
    """The original's create_single_increasing_dataset(3, [2]): 0, 1, 2, 0, 1, ..."""
    dataset = tf.data.Dataset.range(3).map(lambda i: tf.fill(SHAPE, tf.cast(i, tf.float32)))
    return ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.repeat())


def _summing_loop(tf1_graph, replicated, outfed_values):
    """Runs 5 steps of `v = cross_replica_sum(v + x)` over the increasing infeed, outfeeding
    `outfed_values(v_before, v_after)`; returns the loop's result and the outfeed's."""
    infeed = _increasing_infeed()
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(v, x):
        out = cross_replica_sum(v + x)
        return out, outfeed.enqueue(outfed_values(v, out))

    def my_net():
        v = tf.constant(0.0, shape=SHAPE, dtype=np.float32)
        return ipu.loops.repeat(5, body, [v], infeed)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(my_net, inputs=[])
    outfed = outfeed.dequeue()
    replicated()
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        result = sess.run(res)
        return result, sess.run(outfed)


# Replica r reads elements 2k + r of 0, 1, 2, 0, 1, 2, ...: the running cross-replica sums
# after each of the 5 iterations (the original's expected values).
SUMS = [1, 4, 11, 23, 48]


def _assert_per_step(outfed, expected):
    """Each step's two replicas' values are equal and as expected."""
    assert outfed.shape[:2] == (len(expected), REPLICAS)
    for step, value in enumerate(expected):
        np.testing.assert_allclose(outfed[step][0], outfed[step][1])
        np.testing.assert_allclose(outfed[step][0], np.broadcast_to(value, SHAPE))


@pytest.mark.follows("testCreateSimpleReplicatedInfeedOutfeed")
def test_create_simple_replicated_infeed_outfeed(tf1_graph, replicated):
    result, outfed = _summing_loop(tf1_graph, replicated, lambda _, out: out)
    np.testing.assert_allclose(result[0], np.broadcast_to(48, SHAPE))
    _assert_per_step(outfed, SUMS)


@pytest.mark.follows("testCreateSimpleReplicatedInfeedOutfeedTuple")
def test_create_simple_replicated_infeed_outfeed_tuple(tf1_graph, replicated):
    result, (last, this) = _summing_loop(tf1_graph, replicated, lambda v, out: (v, out))
    np.testing.assert_allclose(result[0], np.broadcast_to(48, SHAPE))
    _assert_per_step(last, [0] + SUMS[:-1])
    _assert_per_step(this, SUMS)


@pytest.mark.follows("testCreateSimpleReplicatedInfeedOutfeedDict")
def test_create_simple_replicated_infeed_outfeed_dict(tf1_graph, replicated):
    result, outfed = _summing_loop(tf1_graph, replicated, lambda v, out: {"last": v, "this": out})
    np.testing.assert_allclose(result[0], np.broadcast_to(48, SHAPE))
    assert set(outfed) == {"last", "this"}
    _assert_per_step(outfed["last"], [0] + SUMS[:-1])
    _assert_per_step(outfed["this"], SUMS)


@pytest.mark.follows("testCreateCombinedReplicatedSumGraph")
def test_create_combined_replicated_sum_graph(tf1_graph, replicated):
    def my_graph():
        with tf.device("/device:IPU:0"):
            x1 = _variable("x1", 10.0, shape=[100])
            x2 = _variable("x2", 10, dtype=np.int32, shape=[100])
            y1 = cross_replica_sum(x1 + x1)
            z1 = cross_replica_sum(x1 * x1)
            y2 = cross_replica_sum(x2 + x2)
            z2 = cross_replica_sum(x2 * x2)
            return [cross_replica_sum(z1 + y1), cross_replica_sum(z2 + y2)]

    out = ipu.ipu_compiler.compile(my_graph, [])
    replicated()
    result = _run(tf1_graph, out)
    # Per replica: 2 * (10*10 + 10+10) = 240; summed again over 2 replicas: 480.
    np.testing.assert_allclose(result, np.full([2, 100], 480.0))


@pytest.mark.follows("testReplicatedGraphWithoutAllReduce")
def test_replicated_graph_without_all_reduce(tf1_graph, replicated):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices([1, 2, 3, 4]))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_net():
        return ipu.loops.repeat(2, outfeed.enqueue, infeed_queue=infeed)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(my_net)
    outfed = outfeed.dequeue()
    replicated()
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        sess.run(res)
        np.testing.assert_array_equal(sess.run(outfed), [[1, 2], [3, 4]])
