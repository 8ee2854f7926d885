"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/assume_equal_test.py`.

`ipu.cross_replica_ops.assume_equal_across_replicas` in replicated loops fed by an infeed:
a condition made from replica-dependent values, declared equal across replicas, drives a
`cond` around a cross-replica sum (one tensor, a list of tensors, and a slice of a tensor
in a while loop), in place or copied; the sums are the original's.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1


def _repeating_dataset(value, shape):
    return tf.data.Dataset.from_tensors(tf.constant(value, shape=shape)).repeat()


def _run_body_repeatedly(body, inputs, infeed, iterations, replicas):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(iterations, body, inputs, infeed), inputs=[]
        )
    config = ipu.config.IPUConfig()
    config.optimizations.maximum_cross_replica_sum_buffer_size = 10000
    config.auto_select_ipus = replicas
    config.configure_ipu_system()
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        return sess.run(res)


@pytest.fixture
def graph(tf1_graph):
    yield tf1_graph
    ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testNoDivergenceWithSlicedTensor")
def test_no_divergence_with_sliced_tensor(graph):
    input_shape = [10]
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(_repeating_dataset(1.0, input_shape))
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def step(index, total, replica_dependent_value):
        # Not in place: the value is a slice.
        safe_value = ipu.cross_replica_ops.assume_equal_across_replicas(
            replica_dependent_value[index], False
        )
        intermediate = ipu.ops.cross_replica_ops.cross_replica_sum(safe_value)
        maybe_enqueue = tf.cond(
            tf.greater(intermediate, 0),
            lambda: outfeed_queue.enqueue(intermediate),
            lambda: tf.no_op(),
        )
        with tf.control_dependencies([maybe_enqueue]):
            intermediate = tf.identity(intermediate)
        return index + 1, total + intermediate, replica_dependent_value

    def body(total, replica_dependent_value):
        _, total, _ = tf.while_loop(
            cond=lambda i, *_: tf.less(i, 4),
            body=step,
            loop_vars=[tf.constant(0), total, replica_dependent_value],
        )
        return total

    total = tf.constant(0, shape=input_shape, dtype=np.float32)
    result = _run_body_repeatedly(body, [total], infeed_queue, 1, replicas=4)
    # 1 (the infeed's value) * 4 replicas * 4 steps.
    np.testing.assert_allclose(result[0], np.broadcast_to(16.0, input_shape))


@pytest.mark.follows("testNoDivergenceWithSingleTensor")
@pytest.mark.parametrize("inplace", [True, False])
def test_no_divergence_with_single_tensor(graph, inplace):
    input_shape = [2, 4]
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(_repeating_dataset(1.0, input_shape))

    def body(total, replica_dependent_value):
        y = tf.constant(2.0, shape=input_shape, dtype=np.float32)
        divergent = tf.reduce_all(tf.not_equal(replica_dependent_value, y))
        safe = ipu.ops.cross_replica_ops.assume_equal_across_replicas(divergent, inplace)
        return tf.cond(
            safe,
            lambda: ipu.ops.cross_replica_ops.cross_replica_sum(total + replica_dependent_value),
            lambda: tf.constant(0.0, shape=input_shape, dtype=np.float32),
        )

    total = tf.constant(0.0, shape=input_shape, dtype=np.float32)
    result = _run_body_repeatedly(body, [total], infeed_queue, 2, replicas=2)
    # (0 + 1) * 2 replicas = 2, then (2 + 1) * 2 = 6.
    np.testing.assert_allclose(result[0], np.broadcast_to(6.0, input_shape))


@pytest.mark.follows("testNoDivergenceWithNestedTensors")
@pytest.mark.parametrize("inplace", [True, False])
def test_no_divergence_with_nested_tensors(graph, inplace):
    input_shape = [2, 4]
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(_repeating_dataset(1.0, input_shape))

    def body(total, x):
        conditions = [
            tf.not_equal(x, tf.constant(v, shape=input_shape, dtype=np.float32))
            for v in (2.0, 3.0, 4.0)
        ]
        safe1, safe2, safe3 = ipu.ops.cross_replica_ops.assume_equal_across_replicas(
            conditions, inplace
        )
        true_condition = tf.reduce_all(tf.logical_and(tf.logical_and(safe1, safe2), safe3))
        return tf.cond(
            true_condition,
            lambda: ipu.ops.cross_replica_ops.cross_replica_sum(total + x),
            lambda: tf.constant(0.0, shape=input_shape, dtype=np.float32),
        )

    total = tf.constant(0.0, shape=input_shape, dtype=np.float32)
    result = _run_body_repeatedly(body, [total], infeed_queue, 2, replicas=2)
    np.testing.assert_allclose(result[0], np.broadcast_to(6.0, input_shape))
