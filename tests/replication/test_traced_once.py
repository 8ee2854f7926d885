"""A replicated program's Python is traced once, whatever the replica count.

On the IPU replication is a property of the compiled program: the original
(graphcore/tensorflow tensorflow/python/ipu/ipu_strategy.py, ipu_compiler.py) traces
the user's function once and Poplar runs R copies of it. So Python side effects of
tracing (a counter here) happen once per trace, with 1, 2 or 4 replicas, while each
replica still computes its own numbers (checked against numpy).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu

from openipu._src.engine import compiled_program
from openipu._src.engine.replicas import lockstep
from openipu._src.pipelining import pipelining_ops


@pytest.mark.parametrize("replicas", [1, 2, 4])
def test_strategy_run_in_a_function_traces_once(replicas, strategy_on):
    strategy = strategy_on(replicas)
    traces = []
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with strategy.scope():
        weight = tf.Variable(1.0)

    def fn():
        traces.append(1)
        index = ipu.replication_ops.replication_index()
        mine = tf.cast(index, tf.float32) + 1.0
        total = ipu.cross_replica_ops.cross_replica_sum(mine * weight)
        weight.assign_add(mine)  # each replica updates its own copy
        with tf.control_dependencies([outfeed.enqueue((index, total, weight.read_value()))]):
            return tf.identity(total)

    @tf.function
    def program():
        return strategy.run(fn)

    with strategy.scope():
        totals = [float(program()) for _ in range(2)]
    assert len(traces) == 1
    # numpy: replica r adds r + 1 to its own weight (1.0 at first) each run.
    mine = np.arange(1, replicas + 1, dtype=np.float32)
    weights = np.ones(replicas, np.float32)
    expected_totals, expected_weights = [], []
    for _ in range(2):
        expected_totals.append(float(np.sum(mine * weights)))
        weights = weights + mine
        expected_weights.append(weights.copy())
    assert totals == expected_totals
    indices, outfed_totals, outfed_weights = (np.asarray(t) for t in outfeed.dequeue())
    if replicas == 1:
        indices, outfed_totals, outfed_weights = (
            t[:, None] for t in (indices, outfed_totals, outfed_weights)
        )
    np.testing.assert_array_equal(indices, [list(range(replicas))] * 2)
    np.testing.assert_array_equal(outfed_totals, [[t] * replicas for t in expected_totals])
    np.testing.assert_array_equal(outfed_weights, expected_weights)
    assert float(weight.numpy()) == expected_weights[-1][0]  # the host reads replica 0's


@pytest.mark.parametrize("replicas", [1, 2, 4])
def test_a_repeat_body_with_infeed_traces_once(replicas, strategy_on):
    strategy = strategy_on(replicas)
    data = np.arange(48, dtype=np.float32).reshape(24, 2)
    traces = []
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def body(total, x):
            traces.append(1)
            total = total + tf.reduce_sum(x) * tf.cast(
                ipu.replication_ops.replication_index() + 1, tf.float32
            )
            summed = ipu.cross_replica_ops.cross_replica_sum(tf.reduce_sum(x))
            return total, outfeed.enqueue({"x": x, "total": total, "summed": summed})

        @tf.function(jit_compile=True)
        def net():
            return ipu.loops.repeat(3, body, [0.0], infeed)

        total = strategy.run(net)
    assert len(traces) == 1
    outfed = {k: np.asarray(v).reshape(3, replicas, -1) for k, v in outfeed.dequeue().items()}
    for r in range(replicas):
        rows = np.stack([data[i * replicas + r] for i in range(3)])  # element i * R + r
        np.testing.assert_array_equal(outfed["x"][:, r], rows)
        np.testing.assert_allclose(outfed["total"][:, r, 0], np.cumsum(rows.sum(1)) * (r + 1))
    step_sums = [sum(data[i * replicas + r].sum() for r in range(replicas)) for i in range(3)]
    np.testing.assert_allclose(outfed["summed"][:, :, 0], np.repeat([step_sums], replicas, 0).T)
    assert float(total) == sum(data[i * replicas].sum() for i in range(3))  # replica 0's


def test_random_draws_and_gradient_accumulators_stay_per_replica(strategy_on):
    strategy = strategy_on(2)
    traces = []
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with strategy.scope():
        weight = tf.Variable([0.0, 0.0])
        optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
            tf.compat.v1.train.GradientDescentOptimizer(1.0), num_mini_batches=2
        )

        def body():
            traces.append(1)
            noise = tf.random.uniform([2])
            index = tf.cast(ipu.replication_ops.replication_index(), tf.float32)
            loss = tf.reduce_sum(weight * (index + 1.0))  # gradient: index + 1 per element
            train = optimizer.minimize(loss, var_list=[weight])
            with tf.control_dependencies([train]):
                return outfeed.enqueue((noise, weight.read_value()))

        @tf.function(jit_compile=True)
        def net():
            return ipu.loops.repeat(4, body)

        strategy.run(net)
    assert len(traces) == 1
    noise, weights = (np.asarray(t) for t in outfeed.dequeue())
    assert noise.shape == (4, 2, 2)
    # Each replica draws from its own seed stream.
    assert not np.array_equal(noise[:, 0], noise[:, 1])
    # Replica r accumulates its own gradient (r + 1) over 2 mini-batches; the update sums
    # the replicas' accumulated gradients (a stock optimizer in IPUStrategy's replica
    # context): (1 + 2) * 2 per update, 2 updates. One accumulator shared by the replicas
    # would have held both replicas' gradients before that sum (-24).
    np.testing.assert_allclose(weights[1], [[-6.0, -6.0]] * 2)
    np.testing.assert_allclose(weights[-1], [[-12.0, -12.0]] * 2)


class _CountingModel(keras.Model):
    def __init__(self, traces):
        super().__init__()
        self.traces = traces
        self.dense = keras.layers.Dense(2)

    def call(self, inputs):
        self.traces["call"] += 1
        return self.dense(inputs)


def _fit_traces(replicas):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = replicas
    config.configure_ipu_system()
    try:
        strategy = ipu.ipu_strategy.IPUStrategy()
        rng = np.random.default_rng(0)
        x = rng.normal(size=(32, 4)).astype(np.float32)
        y = rng.normal(size=(32, 2)).astype(np.float32)
        # The train step's Python is counted through its loss (the original's Keras refuses
        # a model that overrides train_step, keras/ipu/extensions).
        traces = {"call": 0, "train_step": 0}

        def counting_mse(y_true, y_pred):
            traces["train_step"] += 1
            return keras.losses.mean_squared_error(y_true, y_pred)

        with strategy.scope():
            keras.utils.set_random_seed(1)
            model = _CountingModel(traces)
            model.build((None, 4))
            model.compile(keras.optimizers.SGD(0.1), counting_mse, steps_per_execution=2)
            built_calls = traces["call"]
            model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
            weights = model.get_weights()
        return traces["train_step"], traces["call"] - built_calls, weights, x, y
    finally:
        ipu.config.reset_ipu_configuration()


def test_keras_fit_on_two_replicas_traces_train_step_once():
    one = _fit_traces(1)
    two = _fit_traces(2)
    # The same traces with 2 replicas as with 1: once per trace of the train function.
    assert two[:2] == one[:2]
    assert two[0] >= 1
    # And the replicas trained: 2 replicas of batch 4 sum their gradients (the original's
    # `_reduce_to` is a cross-replica sum), like one replica of batch 8 at twice the rate.
    _, _, weights, x, y = two
    keras.utils.set_random_seed(1)
    stock = keras.Sequential([keras.layers.Dense(2, input_shape=(4,))])
    stock.compile(keras.optimizers.SGD(0.2), "mse")
    stock.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for ours, theirs in zip(weights, stock.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_pipeline_stages_on_two_replicas_trace_once(strategy_on):
    """A 2-stage pipeline on 4 IPUs: 2 replicas, the function's and each stage's Python
    traced once (the replica count is decided when the pipeline says it spans 2 IPUs)."""
    strategy = strategy_on(4)
    traces = {"net": 0, "stage1": 0, "stage2": 0}
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32)).batch(
        1, drop_remainder=True
    )
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def stage1(value):
            traces["stage1"] += 1
            return value * 2.0, tf.cast(ipu.replication_ops.replication_index(), tf.float32)

        def stage2(value, index):
            traces["stage2"] += 1
            return ipu.cross_replica_ops.cross_replica_sum(value), index, value

        @tf.function(jit_compile=True)
        def net():
            traces["net"] += 1
            return pipelining_ops.pipeline(
                [stage1, stage2], 2, repeat_count=2, infeed_queue=infeed, outfeed_queue=outfeed
            )

        strategy.run(net)
    assert traces == {"net": 1, "stage1": 1, "stage2": 1}
    compiled = compiled_program.recent("IPUStrategy.run")[-1]
    assert (compiled.replicas, compiled.ipus_per_replica) == (2, 2)
    totals, indices, values = (t.numpy() for t in outfeed.dequeue())
    # Mini-batch g of repeat i on replica r holds element (i * 2 + g) * 2 + r.
    elements = np.arange(8, dtype=np.float32).reshape(4, 2, 1)
    np.testing.assert_array_equal(values, elements * 2.0)
    np.testing.assert_array_equal(
        totals, np.repeat((elements * 2.0).sum(axis=1, keepdims=True), 2, axis=1)
    )
    np.testing.assert_array_equal(indices, np.tile([[0.0, 1.0]], (4, 1)))


def test_tf1_compile_on_two_replicas_traces_once(tf1_graph):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    traces = []
    try:

        def my_graph(inp):
            traces.append(1)
            with tf.compat.v1.variable_scope("", use_resource=True):
                x = tf.compat.v1.get_variable(
                    "x", dtype=tf.float32, shape=[], initializer=tf.constant_initializer(2.0)
                )
            index = tf.cast(ipu.replication_ops.replication_index(), tf.float32)
            update = x.assign_add(index + inp)
            with tf.control_dependencies([update]):
                return ipu.cross_replica_ops.cross_replica_sum(x.read_value())

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            out = ipu.ipu_compiler.compile(my_graph, [tf.constant(1.0)])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            # Replica r adds r + 1 to its own copy of x (2.0): 3 + 4, then 4 + 6.
            assert session.run(out) == [7.0]
            assert session.run(out) == [10.0]
    finally:
        ipu.config.reset_ipu_configuration()
    assert len(traces) == 1


def test_engine_code_reading_the_replica_index_falls_back_to_one_trace_per_replica(strategy_on):
    """Python that needs the replica index outside a per-replica call still gets it right."""
    strategy = strategy_on(2)
    traces = []

    def fn():
        traces.append(1)
        # What unconverted engine code does: the index as a Python int.
        index = lockstep.replica_index()
        return ipu.cross_replica_ops.cross_replica_sum(tf.constant(float(index + 1)))

    with strategy.scope():
        total = tf.function(lambda: strategy.run(fn))()
    assert float(total) == 3.0
    # One partial trace (replica 0, traced once), then one per replica.
    assert len(traces) == 3


def test_replica_values_inside_a_tensorflow_loop_trace_once(strategy_on):
    """A plain tf.while_loop (not a device loop) in the replicated function: its body is
    traced once and shared by the replicas' copies, which feed it their own index and
    outfeed queue."""
    strategy = strategy_on(2)
    traces = []
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def fn():
        traces.append(1)

        def body(i, total):
            index = tf.cast(ipu.replication_ops.replication_index(), tf.float32)
            with tf.control_dependencies([outfeed.enqueue(index + tf.cast(i, tf.float32))]):
                return i + 1, total + index + 1.0

        _, total = tf.while_loop(lambda i, _: i < 3, body, [0, 0.0])
        return ipu.cross_replica_ops.cross_replica_sum(total)

    with strategy.scope():
        total = tf.function(lambda: strategy.run(fn))()
    assert len(traces) == 1
    assert float(total) == 3 * 1 + 3 * 2  # replica r adds r + 1 three times
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [[0, 1], [1, 2], [2, 3]])


@pytest.mark.parametrize("replicas", [2, 4])
def test_collectives_inside_a_conditional_the_replicas_agree_on(replicas, strategy_on):
    """As on the IPU, a cross-replica sum may sit in a `tf.cond` (or autograph `if`) whose
    predicate the replicas agree on (`assume_equal_across_replicas`); a conditional on a
    replica's own value, without collectives, still takes each replica's own branch."""
    strategy = strategy_on(replicas)
    traces = []
    with strategy.scope():
        weight = tf.Variable(2.0)

    def fn(threshold):
        traces.append(1)
        mine = tf.cast(ipu.replication_ops.replication_index(), tf.float32) + 1.0
        agreed = ipu.cross_replica_ops.assume_equal_across_replicas(threshold > 0.0)
        if agreed:  # autograph: a tf.cond holding a collective
            summed = ipu.cross_replica_ops.cross_replica_sum(mine * weight)
        else:
            summed = -mine
        own = tf.cond(mine > 1.5, lambda: mine * 10.0, lambda: mine)  # per replica
        return summed, ipu.cross_replica_ops.cross_replica_sum(own)

    @tf.function
    def program(threshold):
        return strategy.run(fn, args=(threshold,))

    with strategy.scope():
        on = [float(t) for t in program(tf.constant(1.0))]
        off = [float(t) for t in program(tf.constant(-1.0))]
    mine = np.arange(1, replicas + 1, dtype=np.float32)
    own = np.where(mine > 1.5, mine * 10.0, mine).sum()
    assert on == [float((mine * 2.0).sum()), float(own)]
    assert off == [-1.0, float(own)]  # replica 0's branch: -(0 + 1)
    assert len(traces) == 1


@pytest.mark.parametrize("replicas", [2, 4])
def test_collectives_inside_a_loop_the_replicas_agree_on(replicas, strategy_on):
    """As on the IPU, a cross-replica sum may sit in a `tf.while_loop` whose trip count the
    replicas agree on (the original's assume_equal_test.py); each replica keeps its own
    loop values."""
    strategy = strategy_on(replicas)
    traces = []

    def fn(steps):
        traces.append(1)
        mine = tf.cast(ipu.replication_ops.replication_index(), tf.float32) + 1.0

        def body(i, total, own):
            return i + 1, total + ipu.cross_replica_ops.cross_replica_sum(own), own * 2.0

        _, total, own = tf.while_loop(lambda i, *_: i < steps, body, [0, 0.0, mine])
        return total, ipu.cross_replica_ops.cross_replica_sum(own)

    @tf.function
    def program(steps):
        return strategy.run(fn, args=(steps,))

    with strategy.scope():
        total, own = program(tf.constant(3))
    mine = np.arange(1, replicas + 1, dtype=np.float32)
    # Iteration j sums every replica's value, mine * 2 ** j.
    assert float(total) == sum(float(mine.sum()) * 2**j for j in range(3))
    assert float(own) == float(mine.sum()) * 2**3
    assert len(traces) == 1
