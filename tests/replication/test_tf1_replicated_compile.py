"""TF1 programs: `ipu_compiler.compile` in a session replicates over the device's IPUs.

Each scenario follows the original's tests (graphcore/tensorflow
tensorflow/python/ipu/tests/replicated_graph_test.py and replicated_index_test.py)
and checks their documented values: programs built with `ipu_scope` and `compile`
on a device of 2 IPUs run 2 replicas without being told to.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


@pytest.fixture
def two_ipus(tf1_graph):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    yield tf1_graph
    ipu.config.reset_ipu_configuration()


def test_cross_replica_sum_of_a_variable_sums_both_replicas(two_ipus):
    # replicated_graph_test.py, testCreateSimpleReplicatedGraph: 2 + 2 = 4.
    def my_graph(inp):
        with tf.compat.v1.variable_scope("", use_resource=True):
            x = tf.compat.v1.get_variable(
                "x", dtype=tf.float32, shape=[], initializer=tf.constant_initializer(2.0)
            )
        return ipu.cross_replica_ops.cross_replica_sum(x + inp)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        out = ipu.ipu_compiler.compile(my_graph, [tf.constant(0.0)])
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        assert session.run(out) == [4.0]


def test_replication_index_differs_per_replica(two_ipus):
    # replicated_index_test.py: the indices 0 and 1, summed over the replicas, give 1.
    def my_graph():
        index = tf.cast(ipu.replication_ops.replication_index(), tf.float32)
        return ipu.cross_replica_ops.cross_replica_sum(index), index

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        total, index = ipu.ipu_compiler.compile(my_graph, [])
    with tf.compat.v1.Session() as session:
        # The host gets replica 0's values.
        assert session.run([total, index]) == [1.0, 0.0]


def test_infeed_interleaves_replicas_and_outfeed_has_a_replica_axis(two_ipus):
    # replicated_graph_test.py, testReplicatedGraphWithoutAllReduce: [[1, 2], [3, 4]].
    dataset = tf.data.Dataset.from_tensor_slices(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        return outfeed.enqueue(x)

    def my_graph():
        return ipu.loops.repeat(2, body, infeed_queue=infeed)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(my_graph, [])
    dequeued = outfeed.dequeue()
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(infeed.initializer)
        session.run(run)
        np.testing.assert_array_equal(session.run(dequeued), [[1.0, 2.0], [3.0, 4.0]])


def test_replicated_training_sums_gradients_across_replicas(two_ipus):
    # Each replica's loss is the cross-replica sum of w * data (replicas see data 1 and 2).
    # The gradient of a cross-replica sum is the sum of the replicas' upstream gradients
    # (1 + 1), so replica 0's gradient is 2 * its data 1.
    dataset = tf.data.Dataset.from_tensor_slices(np.array([1.0, 2.0], np.float32)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def body(data):
        with tf.compat.v1.variable_scope("", use_resource=True):
            x = tf.compat.v1.get_variable(
                "w", dtype=tf.float32, shape=[], initializer=tf.constant_initializer(1.0)
            )
        loss = ipu.cross_replica_ops.cross_replica_sum(x * data)
        return tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

    def my_graph():
        return ipu.loops.repeat(1, body, infeed_queue=infeed)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(my_graph, [])
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(infeed.initializer)
        session.run(run)
        (weight,) = [v for v in tf.compat.v1.global_variables() if v.op.name == "w"]
        # Replica 0 (data 1): upstream gradients 1 and 1 are summed -> 2 * data 1 = 2.
        np.testing.assert_allclose(session.run(weight), 1.0 - 0.1 * 2.0, rtol=1e-6)


def test_gradient_of_an_all_gather_sums_the_replicas_gradients(two_ipus):
    # Each replica's loss weighs the gathered values by [1, 10]; differentiated across
    # replicas, replica r's x gets 2 * weight_r (as the tape-built programs do).
    def my_graph():
        x = tf.cast(ipu.replication_ops.replication_index(), tf.float32) + 1.0
        gathered = ipu.all_to_all_op.all_gather(x[None], replication_factor=2)
        loss = tf.reduce_sum(gathered * tf.constant([[1.0], [10.0]]))
        (gradient,) = tf.compat.v1.gradients(loss, x)
        return gradient, ipu.cross_replica_ops.cross_replica_sum(gradient)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        own, total = ipu.ipu_compiler.compile(my_graph, [])
    with tf.compat.v1.Session() as session:
        assert session.run([own, total]) == [2.0, 22.0]


@pytest.mark.parametrize(
    ("wrapper", "expected"),
    [
        # Each replica applies its own accumulated gradients: 1 - 0.1 * (1 + 3), 1 - 0.1 * (2 + 4).
        ("GradientAccumulationOptimizerV2", [0.6, 0.4]),
        # The cross-replica variant applies the replicas' mean: 1 - 0.1 * (4 + 6) / 2.
        ("CrossReplicaGradientAccumulationOptimizerV2", [0.5, 0.5]),
    ],
)
def test_gradient_accumulation_on_replicas_applies_each_replicas_accumulators(
    two_ipus, wrapper, expected
):
    data = np.arange(1.0, 9.0, dtype=np.float32)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        with tf.compat.v1.variable_scope("model", use_resource=True):
            w = tf.compat.v1.get_variable("w", shape=[], initializer=tf.constant_initializer(1.0))
        optimizer = getattr(ipu.optimizers, wrapper)(
            tf.compat.v1.train.GradientDescentOptimizer(0.1), 2
        )
        with tf.control_dependencies([optimizer.minimize(w * x)]):
            return outfeed.enqueue(w.read_value())

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(2, body, [], infeed), [])
    weights = _run_and_dequeue(run, infeed, outfeed)
    # After the first mini-batch nothing is applied; after the second, each replica's update.
    np.testing.assert_allclose(weights, [[1.0, 1.0], expected], rtol=1e-6)


def test_each_replica_runs_its_own_loop_body(two_ipus):
    # The optimizer is made before the loop, once in each replica's program: each
    # replica's loop body uses its own (its own accumulators), as each IPU replica
    # runs its own program.
    data = np.arange(1.0, 9.0, dtype=np.float32)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def program():
        with tf.compat.v1.variable_scope("model", use_resource=True):
            w = tf.compat.v1.get_variable("w", shape=[], initializer=tf.constant_initializer(1.0))
        optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
            tf.compat.v1.train.GradientDescentOptimizer(0.1), 2
        )

        def body(x):
            with tf.control_dependencies([optimizer.minimize(w * x)]):
                return outfeed.enqueue(w.read_value())

        return ipu.loops.repeat(2, body, [], infeed)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(program, [])
    weights = _run_and_dequeue(run, infeed, outfeed)
    np.testing.assert_allclose(weights, [[1.0, 1.0], [0.6, 0.4]], rtol=1e-6)


def _run_and_dequeue(run, infeed, outfeed):
    """Runs a compiled program once in a session; returns what it enqueued."""
    dequeued = outfeed.dequeue()
    with tf.compat.v1.Session() as session:
        session.run(infeed.initializer)
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(run)
        return session.run(dequeued)
