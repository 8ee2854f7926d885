"""User programs the original IPU Keras accepts (or refuses with a given error), run against
openipu: checks it has no rule the original lacks."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from ipu_tensorflow_addons.keras.layers import AssumeEqualAcrossReplicas, LayerNormalization


def test_assume_equal_inplace_by_truth_value():
    # ops/cross_replica_ops.py reads `inplace` with `if not inplace`.
    x = tf.constant([[1.0, -2.0]])
    for inplace in ("yes", 1, None):
        layer = AssumeEqualAcrossReplicas(inplace=inplace)
        np.testing.assert_array_equal(layer(x), x)
        assert layer.get_config()["inplace"] == inplace


def test_layer_normalization_axes_may_be_numpy_integers():
    x = np.random.RandomState(0).normal(size=(2, 3, 4)).astype(np.float32)
    ours = LayerNormalization(axis=[np.int64(1), np.int64(-1)])
    stock = keras.layers.LayerNormalization(axis=[1, 2])
    np.testing.assert_allclose(ours(x), stock(x), rtol=1e-5, atol=1e-5)


def test_pipeline_stage_takes_numpy_integers(strategy_on):
    strategy = strategy_on(2)
    x = np.random.RandomState(0).normal(size=(8, 4)).astype(np.float32)
    with strategy.scope():
        inputs = keras.Input((4,))
        with keras.ipu.PipelineStage(np.int64(0)):
            hidden = keras.layers.Dense(3, name="hidden")(inputs)
        with keras.ipu.PipelineStage(np.int32(1)):
            outputs = keras.layers.Dense(2, name="out")(hidden)
        model = keras.Model(inputs, outputs)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        stages = [a.pipeline_stage for a in model.get_pipeline_stage_assignment()]
        assert stages == [0, 1]
        model.compile(steps_per_execution=4)
        predicted = model.predict(x, batch_size=1, verbose=0)
    hidden_w, hidden_b, out_w, out_b = model.get_weights()
    np.testing.assert_allclose(
        predicted, (x @ hidden_w + hidden_b) @ out_w + out_b, rtol=1e-5, atol=1e-5
    )


def test_negative_pipeline_stage_is_refused_on_entering_the_scope():
    stage = keras.ipu.PipelineStage(-1)  # keras/ipu/extensions/pipeline_stage_assignment.py
    with pytest.raises(ValueError, match="is not a valid pipeline stage"):
        with stage:
            pass


def test_pipeline_stage_of_no_number_is_refused_on_entering_the_scope():
    # pipeline_stage_assignment.py keeps any stage; `__enter__` compares it with 0.
    for stage in ("first", None):
        scope = keras.ipu.PipelineStage(stage)
        with pytest.raises(TypeError, match="'<' not supported"):
            with scope:
                pass


def _accumulating_model(strategy, steps_per_execution):
    with strategy.scope():
        model = keras.Sequential(
            [keras.layers.Dense(2, kernel_initializer="ones", input_shape=(4,))]
        )
        model.compile(keras.optimizers.SGD(0.1), "mse", steps_per_execution=steps_per_execution)
        model.set_gradient_accumulation_options(
            gradient_accumulation_steps_per_replica=4,
            gradient_accumulation_reduction_method="mean",
        )
    return model


def test_accumulation_is_checked_against_the_execution_cut_to_the_epoch(strategy_on):
    # extensions_base.py: fit checks the data handler's `steps_per_execution`, which the
    # handler cuts to an epoch of fewer steps (data_adapter.py `_truncate_execution_to_epoch`).
    strategy = strategy_on(1)
    rng = np.random.RandomState(0)
    x, y = rng.normal(size=(16, 4)).astype(np.float32), rng.normal(size=(16, 2)).astype(np.float32)
    model = _accumulating_model(strategy, steps_per_execution=8)
    with strategy.scope():
        with pytest.raises(RuntimeError, match="The model has been configured to use gradient"):
            model.fit(x[:8], y[:8], batch_size=4, verbose=0)  # an execution of 2 steps
        model.fit(x, y, batch_size=4, verbose=0)  # 4 steps: one whole accumulation
    stock = keras.Sequential([keras.layers.Dense(2, kernel_initializer="ones", input_shape=(4,))])
    stock.compile(keras.optimizers.SGD(0.1), "mse")
    stock.fit(x, y, batch_size=16, verbose=0)
    for ours, theirs in zip(model.get_weights(), stock.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_pipeline_stage_needs_an_ipu_strategy():
    # keras/ipu/extensions/pipeline_stage_assignment.py: entering the scope under the default
    # strategy (or another strategy) is refused.
    inputs = keras.Input((4,))
    with pytest.raises(
        RuntimeError,
        match=r"^PipelineStage may only be used from within an IPUStrategy context\.$",
    ):
        with keras.ipu.PipelineStage(0):
            keras.layers.Dense(3)(inputs)
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        with pytest.raises(RuntimeError, match="within an IPUStrategy context"):
            with keras.ipu.PipelineStage(0):
                pass


def test_nested_pipeline_stages_are_refused_and_the_outer_scope_still_assigns(strategy_on):
    strategy = strategy_on(2)
    with strategy.scope():
        inputs = keras.Input((4,))
        with keras.ipu.PipelineStage(0):
            hidden = keras.layers.Dense(3)(inputs)
            with pytest.raises(RuntimeError, match=r"^Pipeline stages must not be nested\.$"):
                with keras.ipu.PipelineStage(1):
                    pass
            hidden = keras.layers.Dense(3)(hidden)
        with keras.ipu.PipelineStage(1):
            outputs = keras.layers.Dense(2)(hidden)
        model = keras.Model(inputs, outputs)
        stages = [a.pipeline_stage for a in model.get_pipeline_stage_assignment()]
    assert stages == [0, 0, 1]


def test_first_api_pipeline_stage_builds_outside_a_strategy_but_not_nested():
    # The first IPU Keras API (SDK 2.0 tensorflow/python/ipu/keras/pipeline.py) refused only
    # nested scopes: its pipelined models could be built before entering the strategy.
    from tensorflow.python import ipu

    inputs = keras.Input((4,))
    with ipu.keras.PipelineStage(0):
        hidden = keras.layers.Dense(3)(inputs)
        with pytest.raises(RuntimeError, match="must not be nested"):
            with ipu.keras.PipelineStage(1):
                pass
    with ipu.keras.PipelineStage(1):
        outputs = keras.layers.Dense(2)(hidden)
    model = ipu.keras.PipelineModel(inputs, outputs, gradient_accumulation_count=4)
    assert [r.pipeline_stage for r in model.get_pipeline_stage_assignment()] == [0, 1]
