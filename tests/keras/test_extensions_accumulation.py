"""Gradient accumulation and pipelining of Keras models on the IPU (later API)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


def _data(samples=128, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(samples, 8)).astype(np.float32),
        rng.normal(size=(samples, 2)).astype(np.float32),
    )


def _functional(pipelined=False):
    inputs = keras.Input((8,))
    if pipelined:
        with keras.ipu.PipelineStage(0):
            hidden = keras.layers.Dense(16, activation="tanh", name="hidden")(inputs)
        with keras.ipu.PipelineStage(1):
            outputs = keras.layers.Dense(2, name="out")(hidden)
    else:
        hidden = keras.layers.Dense(16, activation="tanh", name="hidden")(inputs)
        outputs = keras.layers.Dense(2, name="out")(hidden)
    return keras.Model(inputs, outputs)


def _compiled(build, learning_rate=0.1, **kwargs):
    keras.utils.set_random_seed(11)
    model = build()
    model.compile(keras.optimizers.SGD(learning_rate), "mse", **kwargs)
    return model


def _stock_large_batch(x, y, batch_size, learning_rate, epochs=2):
    model = _compiled(_functional, learning_rate)
    model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    return model.get_weights()


def _assert_weights(ours, theirs, rtol=1e-4):
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-5)


@pytest.mark.parametrize(
    "method, learning_rate_scale", [("mean", 1), ("sum", 4), ("running_mean", 1)]
)
def test_accumulation_equals_stock_keras_on_the_larger_batch(strategy, method, learning_rate_scale):
    """N micro-batches of b, one update: stock Keras with batch N*b (sum scales the step by N)."""
    x, y = _data()
    with strategy.scope():
        model = _compiled(_functional, 0.1 / learning_rate_scale, steps_per_execution=8)
        model.set_gradient_accumulation_options(
            gradient_accumulation_steps_per_replica=4, gradient_accumulation_reduction_method=method
        )
        model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    _assert_weights(model.get_weights(), _stock_large_batch(x, y, 32, 0.1))


class _CastingSGD(keras.optimizers.legacy.SGD):
    """Casts gradients to their variables' dtype, as the original's documentation of
    `gradient_accumulation_dtype` asks of the optimizer; records the dtypes it got."""

    received: list = []

    def apply_gradients(self, grads_and_vars, name=None, **kwargs):
        pairs = list(grads_and_vars)
        self.received.extend(g.dtype for g, _ in pairs)
        return super().apply_gradients([(tf.cast(g, v.dtype), v) for g, v in pairs], name, **kwargs)


def test_accumulator_dtype_option(strategy):
    x, y = _data()
    with strategy.scope():
        keras.utils.set_random_seed(11)  # as `_compiled`
        model = _functional()
        model.compile(_CastingSGD(0.1), "mse", steps_per_execution=8)
        model.set_gradient_accumulation_options(4, "mean", dtype=tf.float64)
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    # The optimizer gets the accumulated gradients in the accumulators' dtype.
    assert set(_CastingSGD.received) == {tf.float64}
    store = model._ipu.accumulator_store  # noqa: SLF001
    assert {a.dtype for a in store.accumulators()} == {tf.float64}
    _assert_weights(model.get_weights(), _stock_large_batch(x, y, 32, 0.1, epochs=1))


def test_accumulation_count_must_divide_steps_per_execution(strategy):
    x, y = _data()
    with strategy.scope():
        model = _compiled(_functional, steps_per_execution=8)
        model.set_gradient_accumulation_options(3)
        # keras/ipu/extensions/extensions_base.py: a RuntimeError with this text.
        with pytest.raises(
            RuntimeError,
            match=r"`steps_per_execution` value \(set to 8\) is not divisible by "
            r"`gradient_accumulation_steps_per_replica` \(3\)",
        ):
            model.fit(x, y, batch_size=8, epochs=1, verbose=0)


def test_accumulation_options_are_validated(strategy):
    with strategy.scope():
        model = _compiled(_functional)
    # The original's messages (extensions_base.py `_set_gradient_accumulation_options_impl`).
    with pytest.raises(
        ValueError,
        match="^Expected `gradient_accumulation_steps_per_replica` to be a positive integer, "
        "but got 0 instead",
    ):
        model.set_gradient_accumulation_options(0)
    with pytest.raises(ValueError, match="Found `num_mini_batches` key in"):
        model.set_gradient_accumulation_options(2, num_mini_batches=2)
    with pytest.raises(ValueError, match="Found `opt` key in"):
        model.set_gradient_accumulation_options(2, opt=keras.optimizers.SGD())
    with pytest.raises(ValueError, match="gradient_accumulation_reduction_method must be one of"):
        model.set_gradient_accumulation_options(2, gradient_accumulation_reduction_method="median")
    # The original passes these on to its optimizer wrapper, which refuses an unknown one.
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'colour'"):
        model.set_gradient_accumulation_options(2, colour="blue")


def test_a_count_given_as_none_keeps_the_one_set_before(strategy):
    # extensions_base.py: only a count that is given replaces the earlier one.
    with strategy.scope():
        model = _compiled(_functional)
    model.set_gradient_accumulation_options(4)
    model.set_gradient_accumulation_options(gradient_accumulation_reduction_method="mean")
    assert model._gradient_accumulation_steps_per_replica == 4
    assert str(model._gradient_accumulation_reduction_method).endswith("MEAN")


def test_evaluate_and_predict_ignore_accumulation(strategy):
    x, y = _data()
    with strategy.scope():
        model = _compiled(_functional, steps_per_execution=8)
        model.set_gradient_accumulation_options(4)
        reference = _compiled(_functional)
        np.testing.assert_allclose(
            model.evaluate(x, y, batch_size=8, verbose=0),
            reference.evaluate(x, y, batch_size=8, verbose=0),
            rtol=1e-5,
        )


# Pipelining ----------------------------------------------------------------------------------


def test_pipeline_stage_contexts_assign_functional_layers(strategy):
    with strategy.scope():
        model = _functional(pipelined=True)
    records = model.get_pipeline_stage_assignment()
    assert [(r.layer.name, r.node_index, r.pipeline_stage) for r in records] == [
        ("hidden", 0, 0),
        ("out", 0, 1),
    ]
    assert isinstance(records[0], keras.ipu.FunctionalLayerPipelineStageAssignment)
    assert [layer.name for layer in records[1].inbound_layers] == ["hidden"]


def test_nested_model_assignment_records():
    """The records for a nested model's invocation: its model, node index and the records
    of its own layers (as the original's pipeline_stage_assignment.py)."""
    inner = keras.Sequential([keras.layers.Dense(2)], name="inner")
    inner_records = [keras.ipu.SequentialLayerPipelineStageAssignment(inner.layers[0], 1)]
    functional = keras.ipu.FunctionalNestedModelPipelineStageAssignment(inner, 0, inner_records)
    assert functional.nested_model is inner and functional.is_nested_model
    assert functional.node_index == 0
    assert functional.pipeline_stage_assignments == inner_records
    assert functional.pipeline_stage_assignments is not inner_records  # a copy
    subclassed = keras.ipu.NestedModelPipelineStageAssignment(inner, 3, inner_records)
    assert subclassed.nested_model is inner and subclassed.node_index == 3
    assert isinstance(functional, keras.ipu.NestedModelPipelineStageAssignment)
    sequential = keras.ipu.SequentialNestedModelPipelineStageAssignment(inner, inner_records)
    assert sequential.is_nested_model and sequential.nested_model is inner


@pytest.mark.parametrize("ipu_system", [[2, 1]], indirect=True)
def test_pipelined_model_trains_like_the_unpipelined_one(strategy):
    """The two-stage model on a 2-IPU device, the plain one on a 1-IPU device."""
    x, y = _data()
    with strategy.scope():
        pipelined = _compiled(lambda: _functional(pipelined=True), steps_per_execution=8)
        pipelined.set_pipelining_options(
            gradient_accumulation_steps_per_replica=4,
            device_mapping=[0, 1],
            pipeline_schedule=ipu.ops.pipelining_ops.PipelineSchedule.Interleaved,
            gradient_accumulation_reduction_method="mean",
        )
        pipelined.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    with ipu.ipu_strategy.IPUStrategy("/device:IPU:1").scope():
        plain = _compiled(_functional, steps_per_execution=8)
        plain.set_gradient_accumulation_options(4, gradient_accumulation_reduction_method="mean")
        plain.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    _assert_weights(pipelined.get_weights(), plain.get_weights(), rtol=1e-6)
    _assert_weights(pipelined.get_weights(), _stock_large_batch(x, y, 32, 0.1))


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_fit_of_a_pipelined_model_needs_pipelining_options(strategy):
    x, y = _data()
    with strategy.scope():
        model = _compiled(lambda: _functional(pipelined=True), steps_per_execution=8)
        with pytest.raises(ValueError, match="is pipelined, however `gradient_accumulation_steps"):
            model.fit(x, y, batch_size=8, epochs=1, verbose=0)


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_pipeline_too_shallow_for_its_stages_fails_as_the_original(strategy):
    """Two stages on two IPUs: a training pipeline runs its forward and backward stages
    ([0, 1, 1, 0]), so the original's compiler (pipeline_visitor.cc) wants a multiple of 4
    accumulated batches; evaluate and predict run the 2 forward stages per
    `steps_per_execution`. A refused count fails the first execution, and nothing trains."""
    x, y = _data(samples=32)
    with strategy.scope():
        model = _compiled(lambda: _functional(pipelined=True), steps_per_execution=2)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=2)
        before = model.get_weights()
        with pytest.raises(
            tf.errors.FailedPreconditionError,
            match="The number of iterations of the pipeline must be a multiple of 4, but it is 2",
        ):
            model.fit(x, y, batch_size=4, epochs=1, verbose=0)
        _assert_weights(model.get_weights(), before, rtol=0)
        # Inference pipelines of 2 iterations are accepted...
        assert model.predict(x, batch_size=4, verbose=0).shape == (32, 2)
        # ...but not of 1.
        model.compile(keras.optimizers.SGD(0.1), "mse", steps_per_execution=1)
        with pytest.raises(
            tf.errors.FailedPreconditionError,
            match="The number of iterations of the pipeline must be a multiple of 2, but it is 1",
        ):
            model.evaluate(x, y, batch_size=4, verbose=0)


def test_sequential_assignment_by_list_and_records(strategy):
    with strategy.scope():
        model = keras.Sequential(
            [keras.layers.Dense(4, input_shape=(8,)), keras.layers.Dense(4), keras.layers.Dense(2)]
        )
    model.set_pipeline_stage_assignment([0, 0, 1])
    records = model.get_pipeline_stage_assignment()
    assert [r.pipeline_stage for r in records] == [0, 0, 1]
    assert all(isinstance(r, keras.ipu.SequentialLayerPipelineStageAssignment) for r in records)
    records[1].pipeline_stage = 1
    model.set_pipeline_stage_assignment(records)
    assert [r.pipeline_stage for r in model.get_pipeline_stage_assignment()] == [0, 1, 1]
    lines = []
    model.print_pipeline_stage_assignment_summary(print_fn=lines.append)
    assert any(line.rstrip().endswith("1") and "dense" in line for line in lines)
    model.reset_pipeline_stage_assignment()
    assert model._pipeline_records() is None  # noqa: SLF001


@pytest.mark.parametrize(
    "assignment, error, message",
    [
        # The original's sequential_extensions.py messages.
        ([0, 1], ValueError, r"length of the provided .* \(2\) does not match .* \(3\)"),
        ([1, 0, 0], ValueError, r"first layer .* assigned to 1"),
        ([0, 2, 2], ValueError, r"assigned to pipeline stage 2, however the previous .* 0"),
        ([0, "1", 1], ValueError, r"All elements of `pipeline_stage_assignment`"),
        ([0, -1, 1], ValueError, r"assigned to pipeline stage -1, however the previous .* 0"),
    ],
)
def test_bad_assignments(strategy, assignment, error, message):
    with strategy.scope():
        model = keras.Sequential(
            [keras.layers.Dense(4, input_shape=(8,)), keras.layers.Dense(4), keras.layers.Dense(2)]
        )
    with pytest.raises(error, match=message):
        model.set_pipeline_stage_assignment(assignment)


def test_unassigned_layer_is_named(strategy):
    with strategy.scope():
        inputs = keras.Input((8,))
        with keras.ipu.PipelineStage(0):
            hidden = keras.layers.Dense(4, name="assigned")(inputs)
        outputs = keras.layers.Dense(2, name="forgotten")(hidden)
        # As the original's functional_extensions.py: refused when the model is made.
        with pytest.raises(ValueError, match="However, forgotten has not been assigned to one"):
            keras.Model(inputs, outputs)


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_device_mapping_too_short(strategy):
    x, y = _data()
    with strategy.scope():
        model = _compiled(lambda: _functional(pipelined=True), steps_per_execution=8)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4, device_mapping=[0])
        with pytest.raises(
            ValueError, match=r"^Each stage must be mapped to an IPU: 1 mappings != 2 stages"
        ):
            model.fit(x, y, batch_size=8, epochs=1, verbose=0)


def test_pipelining_options_are_validated(strategy):
    with strategy.scope():
        model = _compiled(lambda: _functional(pipelined=True))
    # The original passes these on to `pipeline`, which refuses an unknown one.
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'pipeline_depth'"):
        model.set_pipelining_options(4, pipeline_depth=2)
    with pytest.raises(
        TypeError,
        match="The given pipeline_schedule is not a member of the PipelineSchedule enumeration",
    ):
        model.set_pipelining_options(4, pipeline_schedule="Grouped")
    with pytest.raises(ValueError, match="Expected `device_mapping` to be a list of integers"):
        model.set_pipelining_options(4, device_mapping=1)
    model.set_pipelining_options(
        4,
        recomputation_mode=ipu.ops.pipelining_ops.RecomputationMode.RecomputeAndBackpropagateInterleaved,
        offload_weight_update_variables=False,
    )
    assert model._ipu.pipelining_kwargs["offload_weight_update_variables"] is False  # noqa: SLF001


def test_subclassed_model_stages_from_call(strategy):
    class TwoStages(keras.Model):
        def __init__(self):
            super().__init__()
            self.first = keras.layers.Dense(4, name="first")
            self.second = keras.layers.Dense(2, name="second")

        def call(self, x):
            with keras.ipu.PipelineStage(0):
                x = self.first(x)
            with keras.ipu.PipelineStage(1):
                return self.second(x)

    with strategy.scope():
        model = TwoStages()
        model.build((None, 8))
    records = model.get_pipeline_stage_assignment()
    assert [(r.layer.name, r.pipeline_stage) for r in records] == [("first", 0), ("second", 1)]
    assert isinstance(records[0], keras.ipu.ModelLayerPipelineStageAssignment)


def test_queue_callback_and_replication_options(strategy):
    with strategy.scope():
        model = _compiled(_functional)
    model.set_infeed_queue_options(prefetch_depth=4)
    model.set_outfeed_queue_options(buffer_depth=2)
    model.set_asynchronous_callbacks(True)
    model.set_replication_options(keras.ipu.ReplicatedMetricReductionMethod.MEAN)
    model.set_infeed_queue_options(prefetch_depth=0)  # the default depth, as in the original
    with pytest.raises(ValueError, match="prefetch_depth must be greater than zero"):
        model.set_infeed_queue_options(prefetch_depth=-1)
    with pytest.raises(TypeError, match="depth"):  # IPUOutfeedQueue has no such argument
        model.set_outfeed_queue_options(depth=2)
    with pytest.raises(ValueError, match="replicated_metric_reduction_method must be one of"):
        model.set_replication_options("MEDIAN")
