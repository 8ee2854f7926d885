"""IPUStrategy programs on a device of R IPUs: R replicas inside each compiled program.

As on the original (tensorflow/python/ipu/ipu_strategy.py and its tests
ipu_strategy_test.py, replicated_*_test.py): from tf.distribute's view the
strategy has one replica, `strategy.run` calls the function once and returns
replica 0's values, and the replicas show in the program: their indices
(`replication_ops.replication_index`), their infeed elements, their outfeed
axis and their cross-replica sums.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

from openipu._src.engine import compiled_program


@pytest.mark.parametrize("replicas", [2, 4])
def test_strategy_is_one_replica_and_its_programs_hold_the_device_replicas(replicas, strategy_on):
    strategy = strategy_on(replicas)
    assert strategy.num_replicas_in_sync == 1
    calls = []
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def fn():
        calls.append(
            int(tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group))
        )
        index = ipu.replication_ops.replication_index()
        with tf.control_dependencies([outfeed.enqueue(index)]):
            return tf.identity(index)

    @tf.function
    def program():
        return strategy.run(fn)

    with strategy.scope():
        index = program()
    assert int(index) == 0  # replica 0's value reaches the host
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [list(range(replicas))])
    # An outfeed enqueued once per run has an iteration axis, then the replica axis.
    # tf.distribute sees one replica, id 0, in every replica the engine builds.
    assert set(calls) == {0}
    assert strategy.experimental_local_results(index)[0] is index


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

        total = strategy.run(net)
    outfed = outfeed.dequeue()
    assert outfed["x"].shape == (3, replicas, 2) and outfed["total"].shape == (3, replicas)
    for r in range(replicas):
        rows = [data[i * replicas + r] for i in range(3)]
        np.testing.assert_array_equal(outfed["x"].numpy()[:, r], rows)
        assert float(outfed["total"][-1, r]) == sum(row.sum() for row in rows)
    assert float(total) == sum(data[i * replicas].sum() for i in range(3))  # replica 0's
    assert last.dequeue().shape == (replicas,)


@pytest.mark.parametrize("replicas", [2, 4])
def test_all_reduce_inside_a_loop_synchronises_every_iteration(replicas, strategy_on):
    strategy = strategy_on(replicas)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(total, step):
        mine = tf.cast(ipu.replication_ops.replication_index() + 1, tf.float32) * step
        total = total + ipu.cross_replica_ops.cross_replica_sum(mine)
        return total, step + 1.0, outfeed.enqueue(total)

    @tf.function(jit_compile=True)
    def net():
        return ipu.loops.repeat(4, body, [0.0, 1.0])

    with strategy.scope():
        total, _ = strategy.run(net)
    expected = sum(range(1, replicas + 1)) * (1 + 2 + 3 + 4)
    assert float(total) == expected
    np.testing.assert_array_equal(outfeed.dequeue().numpy()[-1], [expected] * replicas)


def test_replica_context_reductions_sum_over_the_program_replicas(strategy_on):
    # ipu_strategy.py `_reduce_to`: on the IPU a reduction is a cross-replica sum or mean.
    strategy = strategy_on(4)

    def fn():
        mine = tf.cast(ipu.replication_ops.replication_index(), tf.float32)
        context = tf.distribute.get_replica_context()
        return (
            context.all_reduce(tf.distribute.ReduceOp.SUM, mine),
            context.all_reduce(tf.distribute.ReduceOp.MEAN, mine),
        )

    with strategy.scope():
        total, mean = tf.function(lambda: strategy.run(fn))()
    assert float(total) == 6.0 and float(mean) == 1.5
    # Outside an IPU program a reduction of one replica's value is that value.
    assert float(strategy.reduce(tf.distribute.ReduceOp.SUM, total, axis=None)) == 6.0


def test_replicated_loop_compiles_into_one_xla_program(caplog, strategy_on):
    import logging

    strategy = strategy_on(2)
    caplog.set_level(logging.DEBUG, logger="openipu._src.engine.region")

    def body(total):
        return total + ipu.cross_replica_ops.cross_replica_sum(1.0)

    with strategy.scope():
        total = strategy.run(
            tf.function(lambda: ipu.loops.repeat(3, body, [0.0]), jit_compile=True)
        )
    assert float(total) == 6.0
    assert any("runs as xla" in r.message for r in caplog.records)


def test_each_replica_has_its_own_variables_and_random_numbers(strategy_on):
    strategy = strategy_on(2)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with strategy.scope():
        variable = tf.Variable(3.0)

    def fn():
        index = tf.cast(ipu.replication_ops.replication_index(), tf.float32)
        variable.assign_add(index + 1.0)
        return outfeed.enqueue({"value": variable.read_value(), "draw": tf.random.uniform([4])})

    with strategy.scope():
        tf.function(lambda: strategy.run(fn))()
    outfed = outfeed.dequeue()
    # Replica r added r + 1 to its own copy; the host reads replica 0's.
    np.testing.assert_array_equal(outfed["value"].numpy(), [[4.0, 5.0]])
    assert float(variable.numpy()) == 4.0
    first, second = outfed["draw"].numpy()[0]
    assert not np.array_equal(first, second)


def test_replicated_while_loop_with_an_infeed(strategy_on):
    strategy = strategy_on(2)
    data = np.arange(40, dtype=np.float32).reshape(20, 2)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))

        def body(count, total, x):
            return count + 1, total + ipu.cross_replica_ops.cross_replica_sum(tf.reduce_sum(x))

        @tf.function(jit_compile=True)
        def net():
            return ipu.loops.while_loop(lambda count, total: total < 20.0, body, [0, 0.0], infeed)

        count, total = strategy.run(net)
    # Iteration sums (both replicas): rows 0+1 = 6, rows 2+3 = 22 -> stops after 2 iterations.
    assert int(count) == 2 and float(total) == 28.0


def test_replica_count_follows_reconfiguration(strategy_on):
    # A strategy made before a reconfiguration compiles for the IPUs configured now.
    strategy = strategy_on(2)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 4
    ipu.config.reset_ipu_configuration()
    config.configure_ipu_system()
    with strategy.scope():
        tf.function(
            lambda: strategy.run(lambda: outfeed.enqueue(ipu.replication_ops.replication_index()))
        )()
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [[0, 1, 2, 3]])


def test_strategy_made_before_the_configuration_uses_it(strategy_on):
    ipu.config.reset_ipu_configuration()
    strategy = ipu.ipu_strategy.IPUStrategy()  # no system configured yet
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def fn():
        with tf.control_dependencies([outfeed.enqueue(ipu.replication_ops.replication_index())]):
            return ipu.cross_replica_ops.cross_replica_sum(1.0)

    with strategy.scope():
        total = tf.function(lambda: strategy.run(fn))()
    assert float(total) == 2.0
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [[0, 1]])


def test_strategy_run_inside_a_function_tensorflow_compiles_whole(strategy_on):
    # `@tf.function(jit_compile=True)` around `strategy.run`: XLA compiles the replicas
    # with the function.
    strategy = strategy_on(2)
    with strategy.scope():
        variable = tf.Variable(1.0)

        @tf.function(jit_compile=True)
        def step(x):
            def fn(x):
                total = ipu.cross_replica_ops.cross_replica_sum(x)
                variable.assign_add(total)
                return total

            return strategy.run(fn, args=(x,))

        assert float(step(tf.constant(3.0))) == 6.0
    assert float(variable.numpy()) == 7.0  # replica 0's copy, read by the host


def test_gradient_accumulation_optimizer_applies_in_one_conditional_for_all_replicas(strategy_on):
    # Every 2nd mini-batch the wrapped optimizer applies the accumulated gradients inside a
    # conditional, where the replicas' gradients are summed (IPUStrategy's `_reduce_to`).
    strategy = strategy_on(2)
    data = np.arange(1.0, 9.0, dtype=np.float32)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
        weight = tf.Variable(1.0)
        optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
            tf.compat.v1.train.GradientDescentOptimizer(0.1), 2
        )

        def body(x):
            return optimizer.minimize(lambda: weight * x, var_list=[weight])

        strategy.run(tf.function(lambda: ipu.loops.repeat(4, body, [], infeed), jit_compile=True))
    # Replica 0 reads 1, 3, 5, 7 and replica 1 reads 2, 4, 6, 8 (loss w * x: gradient x);
    # two updates of the summed accumulations: (1 + 3) + (2 + 4), then (5 + 7) + (6 + 8).
    assert float(weight.numpy()) == pytest.approx(1.0 - 0.1 * 10 - 0.1 * 26)


def test_the_same_function_run_again_after_a_reconfiguration_follows_it(strategy_on):
    strategy = strategy_on(2)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    @tf.function
    def fn():
        outfeed.enqueue(ipu.replication_ops.replication_index())

    with strategy.scope():
        strategy.run(fn)
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [[0, 1]])
    ipu.config.reset_ipu_configuration()
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 4
    config.configure_ipu_system()
    with strategy.scope():
        strategy.run(fn)
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [[0, 1, 2, 3]])


def test_a_users_function_around_strategy_run_follows_a_reconfiguration(strategy_on):
    # The original compiles the program again for the device configured now: the same
    # tf.function, traced on 2 IPUs, sums over 4 replicas once 4 IPUs are configured.
    strategy = strategy_on(2)
    with strategy.scope():
        step = tf.function(lambda x: strategy.run(ipu.cross_replica_ops.cross_replica_sum, [x]))
        assert float(step(tf.constant(1.0))) == 2.0
        ipu.config.reset_ipu_configuration()
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = 4
        config.configure_ipu_system()
        assert float(step(tf.constant(1.0))) == 4.0
        assert float(step(tf.constant(2.0))) == 8.0
    # What the engine compiled last for strategy.run: 4 replicas of one IPU.
    compiled = compiled_program.recent("IPUStrategy.run")[-1]
    assert (compiled.replicas, compiled.ipus_per_replica, compiled.ipus) == (4, 1, 4)
