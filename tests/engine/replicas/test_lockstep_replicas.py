"""The engine's replication core: R replicas built in lock-step, each with its own variables.

Checked against numpy replays of R independent replicas (each with its own copy of
every variable), compiled by XLA and as a graph, as the IPU runs replicas: they meet
only in collectives, and the host reads replica 0's variables.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.engine.replicas import exchange_ops, lockstep, replicated


def _replicated_step(variable, counter, data, replicas, jit_compile):
    @tf.function(jit_compile=jit_compile)
    def step():
        def body(r):
            total = exchange_ops.replica_sum(tf.reduce_sum(data[r] * variable))
            counter.assign_add(float(r + 1))  # each replica's own counter
            with tf.GradientTape() as tape:
                loss = exchange_ops.replica_sum(tf.reduce_sum(data[r] * variable * variable))
            variable.assign_sub(0.1 * tape.gradient(loss, variable))
            return total

        return replicated.build(body, replicas)[0]

    return step


def _numpy_replicas(initial, data, replicas, runs):
    """Each replica's own variable; the gradient of a cross-replica sum is summed too."""
    copies = [np.array(initial, np.float64) for _ in range(replicas)]
    totals = []
    for _ in range(runs):
        totals.append(sum(float(np.sum(data[r] * copies[r])) for r in range(replicas)))
        # d/dv of sum_r' sum(x_r' v_r'^2), seen by replica r: R * 2 x_r v_r.
        copies = [copies[r] - 0.1 * replicas * 2 * data[r] * copies[r] for r in range(replicas)]
    return totals, copies


@pytest.mark.parametrize("jit_compile", [True, False])
@pytest.mark.parametrize("replicas", [2, 3])
def test_replicas_keep_their_own_variables_and_meet_in_collectives(replicas, jit_compile):
    data = np.arange(1, 2 * replicas + 1, dtype=np.float32).reshape(replicas, 2) / 4
    variable = tf.Variable([1.0, 2.0])
    counter = tf.Variable(0.0)
    step = _replicated_step(variable, counter, tf.constant(data), replicas, jit_compile)
    totals = [float(step()) for _ in range(3)]
    expected_totals, expected_copies = _numpy_replicas([1.0, 2.0], data, replicas, 3)
    np.testing.assert_allclose(totals, expected_totals, rtol=1e-5)
    # The host reads replica 0's copy.
    np.testing.assert_allclose(variable.numpy(), expected_copies[0], rtol=1e-5)
    assert counter.numpy() == 3.0


def test_host_writes_reach_every_replica_and_replica_state_persists_otherwise():
    counter = tf.Variable(0.0)

    @tf.function
    def step():
        def body(r):
            counter.assign_add(float(r + 1))
            return exchange_ops.replica_gather(counter.read_value())

        return replicated.build(body, 2)[0]

    np.testing.assert_array_equal(step().numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(step().numpy(), [2.0, 4.0])  # each replica kept its own
    counter.assign(10.0)  # the host writes every replica's copy
    np.testing.assert_array_equal(step().numpy(), [11.0, 12.0])
    np.testing.assert_array_equal(step().numpy(), [12.0, 14.0])


def test_replica_index_and_count_inside_replicas():
    @tf.function
    def indices():
        return replicated.build(
            lambda r: tf.constant([lockstep.replica_index(), lockstep.replica_count()]), 4
        )

    assert [list(t.numpy()) for t in indices()] == [[r, 4] for r in range(4)]


def test_groups_sum_and_gather_within_consecutive_replicas():
    @tf.function
    def program():
        def body(r):
            x = tf.constant(float(r + 1))
            return exchange_ops.replica_sum(x, 2), exchange_ops.replica_gather(x, 2)

        return replicated.build(body, 4)

    results = program()
    assert [float(s) for s, _ in results] == [3.0, 3.0, 7.0, 7.0]
    assert [list(g.numpy()) for _, g in results] == [[1, 2], [1, 2], [3, 4], [3, 4]]


def test_gradient_of_a_gather_is_this_replicas_slice_of_the_summed_gradients():
    @tf.function
    def program():
        def body(r):
            x = tf.constant([float(r + 1)])
            with tf.GradientTape() as tape:
                tape.watch(x)
                gathered = exchange_ops.replica_gather(x)
                loss = tf.reduce_sum(gathered * tf.constant([[1.0], [10.0]]))
            return tape.gradient(loss, x)

        return replicated.build(body, 2)

    # Every replica's loss depends on both x: d(sum_r loss_r)/dx_r = 2 * weight_r.
    assert [float(g[0]) for g in program()] == [2.0, 20.0]


def test_replicas_that_call_different_collectives_fail_clearly():
    @tf.function(autograph=False)
    def program():
        def body(r):
            if r == 0:
                return exchange_ops.replica_sum(tf.constant(1.0))
            return exchange_ops.replica_gather(tf.constant(1.0))

        return replicated.build(body, 2)

    with pytest.raises(lockstep.ReplicaDivergenceError, match="same collectives"):
        program()


def test_a_replica_that_skips_a_collective_fails_clearly():
    @tf.function(autograph=False)
    def program():
        def body(r):
            if r == 0:
                return exchange_ops.replica_sum(tf.constant(1.0))
            return tf.constant(1.0)

        return replicated.build(body, 2)

    with pytest.raises(lockstep.ReplicaDivergenceError, match="ended while"):
        program()


def test_an_error_in_one_replica_is_raised_and_no_thread_is_left_waiting():
    import threading

    before = threading.active_count()

    @tf.function(autograph=False)
    def program():
        def body(r):
            if r == 1:
                raise KeyError("replica one failed")
            return exchange_ops.replica_sum(tf.constant(1.0))

        return replicated.build(body, 2)

    with pytest.raises(KeyError, match="replica one failed"):
        program()
    assert threading.active_count() == before
