"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/replicated_stateful_gradient_accumulate_test.py`.

The original's internal stateful gradient-accumulation ops
(`gen_poputil_ops.ipu_stateful_gradient_accumulate` and its momentum form) combined
with a cross-replica sum and `ipu_replication_normalise` over 2 replicas, in a 10-step
while loop: the accumulator gives the sum of 5 mini-batches every 5th step (else
zeros). Those ops come from the generated op modules
(`tensorflow.compiler.plugin.poplar.ops`). The expected values are the original's.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1


def _ops():
    from tensorflow.compiler.plugin.poplar.ops import gen_popops_ops, gen_poputil_ops

    return gen_popops_ops, gen_poputil_ops


def _variable(name):
    with v1.variable_scope("", use_resource=True, reuse=v1.AUTO_REUSE):
        return v1.get_variable(name, [1], np.float32, v1.constant_initializer(0.0))


def _run_loop(tf1_graph, step, carried=1, variables=""):
    """10 iterations of `step(*values)` from y = 10 on 2 replicas: the loop's results, and
    the values of the named `variables` after it."""
    _ops()

    def my_net(y):
        def body(i, *values):
            return (i + 1, *step(*values))

        return v1.while_loop(lambda i, *_: i < 10, body, (0,) + (y,) * carried)

    with tf.device("cpu"):
        y = v1.placeholder(np.float32, [1])
    config = ipu.config.IPUConfig()
    config.optimizations.maximum_cross_replica_sum_buffer_size = 1000
    config.auto_select_ipus = [2]
    config.configure_ipu_system()
    try:
        with tf.device("/device:IPU:0"):
            r = ipu.ipu_compiler.compile(my_net, inputs=[y])
        with v1.Session(graph=tf1_graph) as sess:
            sess.run(v1.global_variables_initializer())
            results = sess.run(r, {y: [10]})
            return results, [sess.run(_variable(name))[0] for name in variables]
    finally:
        ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testStatefulGradientAccumulateAndCrossReplica")
def test_stateful_gradient_accumulate_and_cross_replica(tf1_graph):
    popops, poputil = _ops()

    def step(y):
        ga = poputil.ipu_stateful_gradient_accumulate(
            tf.ones_like(y), num_mini_batches=5, verify_usage=False
        )
        return (y + popops.ipu_cross_replica_sum(ga),)

    (i, y), _ = _run_loop(tf1_graph, step)
    assert i == 10
    np.testing.assert_allclose(y, [30])  # 10 + 2 accumulations x 5 ones x 2 replicas


@pytest.mark.follows("testCrossReplicaAndStatefulGradientAccumulate")
def test_cross_replica_and_stateful_gradient_accumulate(tf1_graph):
    popops, poputil = _ops()

    def step(y):
        cr = popops.ipu_cross_replica_sum(tf.ones_like(y))
        return (y + poputil.ipu_stateful_gradient_accumulate(cr, num_mini_batches=5),)

    (i, y), _ = _run_loop(tf1_graph, step)
    assert i == 10
    np.testing.assert_allclose(y, [30])


@pytest.mark.follows("testCrossReplicaAndNormalizeAndStatefulGradientAccumulate")
def test_cross_replica_and_normalize_and_stateful_gradient_accumulate(tf1_graph):
    popops, poputil = _ops()

    def step(y):
        norm = poputil.ipu_replication_normalise(popops.ipu_cross_replica_sum(tf.ones_like(y)))
        return (y + poputil.ipu_stateful_gradient_accumulate(norm, num_mini_batches=5),)

    (i, y), _ = _run_loop(tf1_graph, step)
    assert i == 10
    np.testing.assert_allclose(y, [20])


def _momentum_step(popops, poputil, name, scale, momentum):
    def step(y):
        var = _variable(name)
        norm = poputil.ipu_replication_normalise(
            popops.ipu_cross_replica_sum(tf.ones_like(y) * scale)
        )
        return y + poputil.ipu_stateful_gradient_accumulate_with_momentum(
            var.handle, norm, momentum=momentum, num_mini_batches=5
        )

    return step


@pytest.mark.follows("testCrossReplicaAndNormalizeAndStatefulGradientAccumulateWithMom")
def test_cross_replica_and_normalize_and_stateful_gradient_accumulate_with_mom(tf1_graph):
    step = _momentum_step(*_ops(), "x", 2.0, 0.8)
    (i, y), variables = _run_loop(tf1_graph, lambda y: (step(y),), variables="x")
    assert i == 10
    np.testing.assert_allclose(y, [38])
    assert variables == [18]


@pytest.mark.follows("testMultiCrossReplicaAndNormalizeAndStatefulGradientAccumulateWithMom")
def test_multi_cross_replica_and_normalize_and_stateful_gradient_accumulate_with_mom(tf1_graph):
    popops, poputil = _ops()
    steps = [
        _momentum_step(popops, poputil, "a", 2.5, 0.8),
        _momentum_step(popops, poputil, "b", 7.0, 0.6),
        _momentum_step(popops, poputil, "c", 8.0, 0.8),
    ]
    (i, a, b, c), variables = _run_loop(
        tf1_graph,
        lambda *values: [s(v) for s, v in zip(steps, values, strict=True)],
        carried=3,
        variables="abc",
    )
    assert i == 10
    np.testing.assert_allclose([a, b, c], [[45], [101], [122]])
    assert variables == [22.5, 56, 72]
