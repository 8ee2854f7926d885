"""`pipelining_ops.pipeline` (spec 21.15.7): numbers against numpy, options, error rules."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

pipelining_ops = ipu.pipelining_ops


def _data(batches=16, batch=4, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(batches * batch, 4)).astype(np.float32),
        rng.normal(size=(batches * batch, 1)).astype(np.float32),
    )


def _numpy_training(x, y, batch, count, repeats, learning_rate, reduction="sum", replicas=1):
    """Two linear stages, squared error, gradients accumulated over `count` mini-batches."""
    w1 = np.ones([4, 3], np.float32)
    w2 = np.ones([3, 1], np.float32)
    losses = []
    for r in range(repeats):
        g1 = np.zeros_like(w1)
        g2 = np.zeros_like(w2)
        for g in range(count):
            step_g1 = np.zeros_like(w1)
            step_g2 = np.zeros_like(w2)
            for replica in range(replicas):
                i = (r * count + g) * replicas + replica
                xb, yb = x[i * batch : (i + 1) * batch], y[i * batch : (i + 1) * batch]
                h = xb @ w1
                e = h @ w2 - yb
                losses.append(np.mean(e**2))
                d = 2 * e / e.size
                step_g2 += h.T @ d / replicas
                step_g1 += xb.T @ (d @ w2.T) / replicas
            scale = 1 / count if reduction == "mean" else 1
            g1 += step_g1 * scale
            g2 += step_g2 * scale
        w1 = w1 - learning_rate * g1
        w2 = w2 - learning_rate * g2
    return np.array(losses), w1, w2


def _train(strategy, x, y, batch, count, repeats, learning_rate, cross_replica=False, **kwargs):
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        w1 = tf.Variable(tf.ones([4, 3]))
        w2 = tf.Variable(tf.ones([3, 1]))

        def stage1(features, labels):
            return tf.matmul(features, w1), labels

        def stage2(hidden, labels):
            return tf.reduce_mean(tf.square(tf.matmul(hidden, w2) - labels))

        def optimizer_function(loss):
            optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
            if cross_replica:
                optimizer = ipu.optimizers.CrossReplicaOptimizer(optimizer)
            return pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

        @tf.function(jit_compile=True)
        def net():
            return pipelining_ops.pipeline(
                [stage1, stage2],
                gradient_accumulation_count=count,
                repeat_count=repeats,
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                optimizer_function=optimizer_function,
                outfeed_loss=True,
                **kwargs,
            )

        strategy.run(net)
    return outfeed.dequeue().numpy(), w1, w2


@pytest.mark.parametrize("reduction", ["sum", "mean", "running_mean"])
def test_training_pipeline_matches_numpy(reduction, strategy_on):
    strategy = strategy_on(2)
    x, y = _data()
    # numpy's integers too, as the original takes any integer (an OpSharding int64 field).
    mapping = list(np.arange(2))
    losses, w1, w2 = _train(
        strategy, x, y, 4, 4, 2, 0.01, reduction_method=reduction, device_mapping=mapping
    )
    expected, e1, e2 = _numpy_training(x, y, 4, 4, 2, 0.01, "mean" if reduction != "sum" else "sum")
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    np.testing.assert_allclose(w1.numpy(), e1, rtol=1e-5)
    np.testing.assert_allclose(w2.numpy(), e2, rtol=1e-5)


def test_replicated_pipeline_matches_one_replica_with_the_global_batch(strategy_on):
    """A 2-IPU pipeline on a 4-IPU device: 2 replicas, CrossReplicaOptimizer (mean).

    The wrapped stock optimizer then sums the replicas' means in IPUStrategy's replica
    context (the original's `_reduce_to` is a cross-replica sum): twice the mean's step.
    """
    strategy = strategy_on(4)
    x, y = _data(batches=32)
    losses, w1, w2 = _train(strategy, x, y, 4, 4, 2, 0.01, cross_replica=True)
    expected, e1, e2 = _numpy_training(x, y, 4, 4, 2, 0.02, replicas=2)
    assert losses.shape == (8, 2)
    np.testing.assert_allclose(np.sort(losses.ravel()), np.sort(expected), rtol=1e-5)
    np.testing.assert_allclose(strategy.experimental_local_results(w1)[0].numpy(), e1, rtol=1e-5)
    np.testing.assert_allclose(strategy.experimental_local_results(w2)[0].numpy(), e2, rtol=1e-5)


def test_inference_pipeline_enqueues_every_mini_batch(strategy_on):
    strategy = strategy_on(2)
    x, _ = _data()
    dataset = tf.data.Dataset.from_tensor_slices(x).batch(4, drop_remainder=True)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def net():
            return pipelining_ops.pipeline(
                [
                    lambda features: features * 2.0,
                    lambda doubled: (doubled + 1.0, tf.reduce_sum(doubled)),
                ],
                gradient_accumulation_count=4,
                repeat_count=2,
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                pipeline_schedule=pipelining_ops.PipelineSchedule.Sequential,
            )

        strategy.run(net)
    values, sums = outfeed.dequeue()
    assert values.shape == (8, 4, 4) and sums.shape == (8,)
    np.testing.assert_allclose(values.numpy().reshape(-1, 4), x[:32] * 2 + 1, rtol=1e-6)


def test_accumulate_outfeed_and_outfeed_mask(strategy_on):
    strategy = strategy_on(2)
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        accumulated = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        w = tf.Variable(tf.zeros([4, 1]))

        def stage1(features, labels):
            return tf.matmul(features, w), labels

        def stage2(prediction, labels):
            return tf.reduce_mean(tf.square(prediction - labels)), tf.reduce_sum(labels)

        @tf.function(jit_compile=True)
        def net():
            return pipelining_ops.pipeline(
                [stage1, stage2],
                gradient_accumulation_count=4,
                repeat_count=2,
                infeed_queue=infeed,
                outfeed_queue=accumulated,
                optimizer_function=lambda loss, total: pipelining_ops.OptimizerFunctionOutput(
                    tf.compat.v1.train.GradientDescentOptimizer(0.0), loss
                ),
                accumulate_outfeed=True,
                outfeed_mask=[True, False],
            )

        strategy.run(net)
    kept = accumulated.dequeue()
    assert isinstance(kept, list) and len(kept) == 1
    sums = kept[0].numpy()
    # One entry per repeat: the labels' sum over its 4 mini-batches (the loss is masked out).
    np.testing.assert_allclose(sums.ravel(), [y[:16].sum(), y[16:32].sum()], rtol=1e-5, atol=1e-6)


def test_tf1_pipeline_with_variables_in_the_stages(tf1_graph, strategy_on):
    strategy_on(2)
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def stage1(features, labels):
        with tf.compat.v1.variable_scope("stage1", use_resource=True):
            w1 = tf.compat.v1.get_variable("w", [4, 3], initializer=tf.compat.v1.ones_initializer())
        return tf.matmul(features, w1), labels

    def stage2(hidden, labels):
        with tf.compat.v1.variable_scope("stage2", use_resource=True):
            w2 = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.ones_initializer())
        return tf.reduce_mean(tf.square(tf.matmul(hidden, w2) - labels))

    def optimizer_function(loss):
        return pipelining_ops.OptimizerFunctionOutput(
            tf.compat.v1.train.GradientDescentOptimizer(0.01), loss
        )

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(
            lambda: pipelining_ops.pipeline(
                [stage1, stage2],
                4,
                repeat_count=2,
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                optimizer_function=optimizer_function,
                outfeed_loss=True,
            )
        )
    dequeue = outfeed.dequeue()
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        session.run(infeed.initializer)
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(run)
        losses = session.run(dequeue)
        w1 = session.run([v for v in tf.compat.v1.global_variables() if v.name == "stage1/w:0"][0])
    expected, e1, _ = _numpy_training(x, y, 4, 4, 2, 0.01)
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    np.testing.assert_allclose(w1, e1, rtol=1e-5)


def test_recomputation_checkpoint_is_the_identity_and_options_validate():
    values = [tf.constant(1.0), tf.constant([2.0, 3.0])]
    checked = pipelining_ops.recomputation_checkpoint(values)
    assert [v.numpy().tolist() for v in checked] == [1.0, [2.0, 3.0]]
    options = pipelining_ops.PipelineStageOptions(
        matmul_options={"availableMemoryProportion": "0.2"}
    )
    assert options.get_proto()["matmul_options"] == {"availableMemoryProportion": "0.2"}
    with pytest.raises(TypeError, match="PipelineStageOptions.matmul_options must be dictionary."):
        pipelining_ops.PipelineStageOptions(matmul_options=["x"])
    assert pipelining_ops.reduce(lambda a, b: a + b, [1, 2, 3]) == 6


def _stage(x):
    return x


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"computational_stages": _stage}, TypeError, "must be a list or tuple of functions"),
        (
            {"gradient_accumulation_count": None},
            ValueError,
            "^gradient_accumulation_count must be specified\\.$",
        ),
        (
            {"device_mapping": [0]},
            ValueError,
            "device_mapping has 1 entries but the pipeline has 2",
        ),
        ({"device_mapping": 0}, TypeError, "device_mapping must be a list or tuple"),
        (
            {"pipeline_schedule": "Grouped"},
            TypeError,
            "The given pipeline_schedule is not a member of the PipelineSchedule enumeration",
        ),
        (
            {"recomputation_mode": 1},
            TypeError,
            "The given recomputation_mode is not a member of the RecomputationMode enumeration",
        ),
        ({"continuous_weight_updates": True}, NotImplementedError, "continuous_weight_updates"),
        (
            {"outfeed_loss": True},
            ValueError,
            "An optimizer_function must be provided when outfeed_loss is True",
        ),
        (
            {"outfeed_mask": [True]},
            ValueError,
            "An optimizer_function must be provided when outfeed_mask is set",
        ),
        (
            {"accumulate_outfeed": True},
            ValueError,
            "An outfeed_queue must be provided when accumulate_outfeed is True",
        ),
        (
            {
                "batch_serialization_iterations": 2,
                "pipeline_schedule": pipelining_ops.PipelineSchedule.Grouped,
            },
            NotImplementedError,
            "needs the Sequential pipeline schedule",
        ),
        (
            {"forward_propagation_stages_poplar_options": [pipelining_ops.PipelineStageOptions()]},
            ValueError,
            "has 1 entries but the pipeline has 2 stages",
        ),
        (
            {"infeed_queue": tf.data.Dataset.range(2)},
            TypeError,
            "infeed_queue is not an instance of ipu_infeed_queue.IPUInfeedQueue",
        ),
        (
            # Parsed only for training pipelines (ops/pipelining_ops.py).
            {"reduction_method": "median", "optimizer_function": lambda loss: None},
            ValueError,
            "reduction_method must be one of",
        ),
    ],
)
def test_error_rules(kwargs, error, message):
    arguments = {"computational_stages": [_stage, _stage], "gradient_accumulation_count": 4}
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        pipelining_ops.pipeline(**arguments)


def test_interleaved_training_needs_one_stage_per_ipu():
    with pytest.raises(
        NotImplementedError,
        match="The pipelining schedule .Interleaved. does not currently support multiple pipeline stages on the same device for training",
    ):
        pipelining_ops.pipeline(
            [_stage, _stage],
            4,
            device_mapping=[0, 0],
            pipeline_schedule=pipelining_ops.PipelineSchedule.Interleaved,
            optimizer_function=lambda x: None,
        )


def test_a_count_the_schedule_cannot_lay_out_fails_when_the_pipeline_runs(strategy_on):
    """As the original's compiler (pipeline_visitor.cc): a grouped training pipeline of 2
    stages repeats blocks of 4 iterations (its forward and backward stages); 6 is refused
    when the program runs, before anything trains."""
    strategy = strategy_on(2)
    x, y = _data()
    with pytest.raises(
        tf.errors.FailedPreconditionError,
        match=r"^The number of iterations of the pipeline must be a multiple of 4, but it is 6\. "
        "This number might be called `gradient_accumulation_count`",
    ):
        _train(strategy, x, y, 4, 6, 1, 0.01, device_mapping=[0, 1])


def test_compiling_an_executable_of_such_a_pipeline_fails(strategy_on):
    """Traced for an executable, the pipeline is being compiled: refused there."""
    strategy_on(1)
    dataset = tf.data.Dataset.from_tensor_slices(np.ones((12, 5), np.float32)).batch(1, True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    @tf.function
    def program():
        pipelining_ops.pipeline(
            [lambda x: x + 1.0, lambda x: x * 2.0, lambda x: x],
            gradient_accumulation_count=4,
            infeed_queue=infeed,
            outfeed_queue=ipu.ipu_outfeed_queue.IPUOutfeedQueue(),
            device_mapping=[0, 0, 0],
        )

    with pytest.raises(tf.errors.FailedPreconditionError, match="a multiple of 3, but it is 4"):
        ipu.ops.application_compile_op.experimental_application_compile_op(program, inputs=[])


@pytest.mark.parametrize(
    "schedule, mapping, training, io_tiles, overlap",
    [
        ("Grouped", [0, 1, 2], False, False, 3),
        ("Grouped", [0, 1, 2], True, False, 6),
        ("Grouped", [0, 1, 2], True, True, None),  # at least 6 + 2
        ("Interleaved", [0, 1, 2], False, False, 3),
        ("Interleaved", [0, 1, 2], True, False, 3),  # [0, 1, 2, 2, 1, 0] rotated by 0, 2, 4
        ("Interleaved", [2, 2, 2], False, False, 1),
        ("Sequential", [0, 1, 2], True, False, 1),
    ],
)
def test_the_iteration_counts_each_schedule_takes(schedule, mapping, training, io_tiles, overlap):
    from openipu._src.pipelining import pipeline_depth

    schedule = pipelining_ops.PipelineSchedule[schedule]
    accepted = [
        count
        for count in range(1, 25)
        if pipeline_depth.refusal(count, schedule, mapping, training, io_tiles) is None
    ]
    if overlap is None:
        assert accepted == list(range(8, 25))
    else:
        assert accepted == list(range(overlap, 25, overlap))


def test_circular_union_is_the_original_documented_example():
    from openipu._src.pipelining import pipeline_depth

    # pipeline_visitor_utils.h `CircularUnion`: rotations 0 and 2 only.
    assert pipeline_depth.circular_union([0, 1, 2, 0, 0, 2, 1, 0]) == [0, 2]


def test_optimizer_function_output_checks_its_arguments():
    with pytest.raises(TypeError, match="opt must be an optimizer"):
        pipelining_ops.OptimizerFunctionOutput("sgd", tf.constant(1.0))
    with pytest.raises(TypeError, match="loss must be a tensor"):
        pipelining_ops.OptimizerFunctionOutput(
            tf.compat.v1.train.GradientDescentOptimizer(0.1), 1.0
        )


def test_collectives_in_stages_count_replicas_not_ipus(strategy_on):
    """A 2-IPU pipeline on a 4-IPU device is 2 replicas to the collectives in its stages."""
    strategy = strategy_on(4)
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32)).batch(
        1, drop_remainder=True
    )
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def stage1(value):
            return value, tf.cast(ipu.replication_ops.replication_index(), tf.float32)

        def stage2(value, index):
            total = ipu.cross_replica_ops.cross_replica_sum(value)
            gathered = ipu.cross_replica_ops.cross_replica_mean(tf.ones([]))
            return total, index, gathered

        @tf.function(jit_compile=True)
        def net():
            return pipelining_ops.pipeline(
                [stage1, stage2], 2, repeat_count=2, infeed_queue=infeed, outfeed_queue=outfeed
            )

        strategy.run(net)
    totals, indices, means = (t.numpy() for t in outfeed.dequeue())
    assert totals.shape == (4, 2, 1)
    # Mini-batch g of repeat i on replica r holds value (i * 2 + g) * 2 + r.
    values = np.arange(8, dtype=np.float32).reshape(4, 2, 1)
    np.testing.assert_array_equal(totals, np.repeat(values.sum(axis=1, keepdims=True), 2, axis=1))
    np.testing.assert_array_equal(indices, np.tile([[0.0, 1.0]], (4, 1)))
    np.testing.assert_array_equal(means, np.ones((4, 2)))


@pytest.mark.parametrize("by", ["variables", "tape"])
def test_a_keras_optimizer_trains_only_the_variables_named(by, strategy_on):
    # OptimizerFunctionOutput(variables=...) or (tape=...) as in the original's pipelines:
    # the gradients are taken for those variables only; the other stage's weights stay.
    strategy = strategy_on(2)
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        w1 = tf.Variable(tf.ones([4, 3]))
        w2 = tf.Variable(tf.ones([3, 1]))

        def stage1(features, labels):
            return tf.matmul(features, w1), labels

        def stage2(hidden, labels):
            return tf.reduce_mean(tf.square(tf.matmul(hidden, w2) - labels))

        optimizer = tf.keras.optimizers.SGD(0.01)

        def optimizer_function(loss):
            if by == "variables":
                return pipelining_ops.OptimizerFunctionOutput(optimizer, loss, variables=[w2])
            with tf.GradientTape() as tape:
                tape.watch(w2)
            return pipelining_ops.OptimizerFunctionOutput(optimizer, loss, tape=tape)

        @tf.function(jit_compile=True)
        def net():
            return pipelining_ops.pipeline(
                [stage1, stage2],
                gradient_accumulation_count=4,
                repeat_count=2,
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                optimizer_function=optimizer_function,
                outfeed_loss=True,
                device_mapping=[0, 1],
            )

        strategy.run(net)
    # numpy: w1 fixed at ones, w2 trained by SGD on the summed gradients of 4 mini-batches.
    e2 = np.ones([3, 1], np.float32)
    w1_value = np.ones([4, 3], np.float32)
    for r in range(2):
        g2 = np.zeros_like(e2)
        for g in range(4):
            i = r * 4 + g
            h = x[i * 4 : (i + 1) * 4] @ w1_value
            e = h @ e2 - y[i * 4 : (i + 1) * 4]
            g2 += h.T @ (2 * e / e.size)
        e2 = e2 - 0.01 * g2
    np.testing.assert_allclose(w1.numpy(), w1_value)
    np.testing.assert_allclose(w2.numpy(), e2, rtol=1e-5)


@pytest.mark.parametrize("configured", ["before", "after"])
def test_replicated_tf1_pipeline_finds_its_stage_variables_in_the_callers_scope(
    configured, tf1_graph, strategy_on
):
    """Stages of a 2-replica pipeline make their variables in the scope the pipeline is
    called in (one trace, as the original's), also when the graph is built before
    `configure_ipu_system` (its build is finished at the first run)."""
    x = np.arange(16, dtype=np.float32).reshape(8, 1, 2)
    weights = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(x))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def stage1(features):
        with tf.compat.v1.variable_scope("vs", use_resource=True):
            w = tf.compat.v1.get_variable("w", initializer=weights)
        return features @ w

    def stage2(hidden):
        return hidden * 2.0

    def program():
        with tf.compat.v1.variable_scope("ipu", use_resource=True):
            return pipelining_ops.pipeline(
                [stage1, stage2], 2, infeed_queue=infeed, outfeed_queue=outfeed
            )

    if configured == "before":
        strategy_on(4)  # a 2-IPU pipeline on 4 IPUs: 2 replicas
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(program)
    if configured == "after":
        strategy_on(4)
    dequeue = outfeed.dequeue()
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(infeed.initializer)
        session.run(run)
        outputs = session.run(dequeue)
    assert [v.name for v in tf.compat.v1.global_variables()] == ["ipu/vs/w:0"]
    # Mini-batch g on replica r is element g * 2 + r.
    expected = (x[:4] @ weights * 2.0).reshape(2, 2, 1, 2)
    np.testing.assert_allclose(outputs, expected)
