"""Replicas on one host: device loops, infeeds, outfeeds and collectives with R replicas."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


@pytest.mark.parametrize("replicas", [2, 4])
def test_replicas_follow_the_device(replicas, strategy_on):
    strategy = strategy_on(replicas)
    assert strategy.num_replicas_in_sync == replicas

    @tf.function(jit_compile=True)
    def index():
        return (
            ipu.replication_ops.replication_index()
            if hasattr(ipu, "replication_ops")
            else (tf.distribute.get_replica_context().replica_id_in_sync_group)
        )

    values = strategy.experimental_local_results(strategy.run(lambda: tf.constant(1.0)))
    assert len(values) == replicas


@pytest.mark.parametrize("replicas", [2, 4])
def test_infeed_hands_replicas_consecutive_elements_and_outfeed_has_a_replica_axis(
    replicas, strategy_on
):
    strategy = strategy_on(replicas)
    data = np.arange(64, dtype=np.float32).reshape(32, 2)
    dataset = tf.data.Dataset.from_tensor_slices(data)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        last = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST)

        def body(total, x):
            total = total + tf.reduce_sum(x)
            return total, outfeed.enqueue({"x": x, "total": total}), last.enqueue(total)

        @tf.function(jit_compile=True)
        def net():
            return ipu.loops.repeat(3, body, [0.0], infeed)

        totals = strategy.experimental_local_results(strategy.run(net))
    outfed = outfeed.dequeue()
    assert outfed["x"].shape == (3, replicas, 2) and outfed["total"].shape == (3, replicas)
    for r in range(replicas):
        rows = [data[i * replicas + r] for i in range(3)]
        np.testing.assert_array_equal(outfed["x"].numpy()[:, r], rows)
        assert float(totals[r]) == sum(row.sum() for row in rows)
    assert last.dequeue().shape == (replicas,)


@pytest.mark.parametrize("replicas", [2, 4])
def test_all_reduce_inside_a_loop_synchronises_every_iteration(replicas, strategy_on):
    strategy = strategy_on(replicas)

    def body(total, step):
        context = tf.distribute.get_replica_context()
        mine = tf.cast(context.replica_id_in_sync_group + 1, tf.float32) * step
        return total + context.all_reduce(tf.distribute.ReduceOp.SUM, mine), step + 1.0

    @tf.function(jit_compile=True)
    def net():
        return ipu.loops.repeat(4, body, [0.0, 1.0])

    with strategy.scope():
        results = strategy.run(net)
    totals = strategy.experimental_local_results(results[0])
    expected = sum(range(1, replicas + 1)) * (1 + 2 + 3 + 4)
    assert [float(t) for t in totals] == [expected] * replicas


def test_replicated_loop_compiles_into_one_xla_program(caplog, strategy_on):
    import logging

    strategy = strategy_on(2)
    caplog.set_level(logging.DEBUG, logger="openipu._src.engine.region")

    def body(total):
        context = tf.distribute.get_replica_context()
        return total + context.all_reduce(tf.distribute.ReduceOp.SUM, 1.0)

    with strategy.scope():
        strategy.run(tf.function(lambda: ipu.loops.repeat(3, body, [0.0]), jit_compile=True))
    assert any("runs as xla" in r.message for r in caplog.records)


def test_variables_are_mirrored_and_random_numbers_differ_per_replica(strategy_on):
    strategy = strategy_on(2)
    with strategy.scope():
        variable = tf.Variable(3.0)
    assert [float(v) for v in strategy.experimental_local_results(variable)] == [3.0, 3.0]

    @tf.function(jit_compile=True)
    def draw():
        return tf.random.uniform([4])

    first, second = strategy.experimental_local_results(strategy.run(draw))
    assert not np.array_equal(first.numpy(), second.numpy())


@pytest.mark.parametrize("replicas", [2])
def test_replicated_while_loop_with_an_infeed(replicas, strategy_on):
    strategy = strategy_on(replicas)
    data = np.arange(40, dtype=np.float32).reshape(20, 2)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))

        def body(count, total, x):
            context = tf.distribute.get_replica_context()
            return count + 1, total + context.all_reduce(
                tf.distribute.ReduceOp.SUM, tf.reduce_sum(x)
            )

        @tf.function(jit_compile=True)
        def net():
            return ipu.loops.while_loop(lambda count, total: total < 20.0, body, [0, 0.0], infeed)

        counts, totals = strategy.run(net)
    # Iteration sums (both replicas): rows 0+1 = 6, rows 2+3 = 22 -> stops after 2 iterations.
    assert [int(c) for c in strategy.experimental_local_results(counts)] == [2, 2]
    assert [float(t) for t in strategy.experimental_local_results(totals)] == [28.0, 28.0]
