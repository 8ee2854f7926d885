"""The first IPU Keras API (tensorflow2-support.txt): Model, Sequential, PipelineModel, PipelineSequential."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from first_keras_api_models import assert_weights, data, layers, stock_weights
from tensorflow.python import ipu


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


def test_sequential_trains_like_stock_keras(strategy):
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential(layers())
        assert model.trainable_variables == []  # built at the first fit
        model.compile(keras.optimizers.SGD(0.1), "mse")
        history = model.fit(x, y, batch_size=8, epochs=1, shuffle=False, steps_per_run=4, verbose=0)
    assert len(history.history["loss"]) == 1
    assert_weights(model.get_weights(), stock_weights(x, y, 8, 0.1))


def test_functional_model_with_gradient_accumulation_sums(strategy):
    """Accumulation sums 4 micro-batch gradients: stock Keras on batch 32 with 4x the rate."""
    x, y = data()
    with strategy.scope():
        inputs = keras.Input((8,))
        first, second = layers()
        model = ipu.keras.Model(inputs, second(first(inputs)), gradient_accumulation_count=4)
        model.compile(keras.optimizers.SGD(0.1 / 4), "mse")
        model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert_weights(model.get_weights(), stock_weights(x, y, 32, 0.1, epochs=2))
    assert model.optimizer.iterations.numpy() == 4  # one update per 4 batches, 2 epochs


def test_models_cannot_be_called_directly(strategy):
    with strategy.scope():
        model = ipu.keras.Sequential([keras.layers.Dense(2, input_shape=(8,))])
        with pytest.raises(
            ValueError, match="can only be called through the `fit`, `evaluate` or `predict`"
        ):
            model(np.ones((1, 8), np.float32))


def test_fit_outside_the_strategy_fails(strategy):
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential(layers())
        model.compile("sgd", "mse")
    with pytest.raises(ValueError, match="can only be used on an IPU device"):
        model.fit(x, y, batch_size=8, verbose=0)


def test_first_api_argument_rules(strategy):
    x, y = data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)
    with strategy.scope():
        model = ipu.keras.Sequential(layers())
        with pytest.raises(NotImplementedError, match="run_eagerly"):
            model.compile("sgd", "mse", run_eagerly=True)
        with pytest.raises(ValueError, match="loss_weights must be a list"):
            model.compile("sgd", "mse", loss_weights=2.0)
        model.compile("sgd", "mse")
        with pytest.raises(ValueError, match="batch_size cannot be given with a Dataset"):
            model.fit(dataset, batch_size=8)
        with pytest.raises(ValueError, match="y cannot be given with a Dataset"):
            model.fit(dataset, y)
        with pytest.raises(NotImplementedError, match="validation_data"):
            model.fit(x, y, batch_size=8, validation_data=(x, y))
        with pytest.raises(ValueError, match="When using an infinitely repeating dataset, you"):
            model.fit(dataset.repeat())
        with pytest.raises(
            ValueError,
            match=r"Steps per epoch times gradient accumulation count \(9 x 1\) is greater than",
        ):
            model.fit(dataset, steps_per_epoch=9)
    with pytest.raises(ValueError, match="IPU Sequential requires a list of Layers"):
        ipu.keras.Sequential(keras.layers.Dense(2))
    with pytest.raises(ValueError, match="of Layers may only contain Keras Layers"):
        ipu.keras.Sequential([keras.layers.Dense(2), "relu"])


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_pipeline_model_steps_are_pipeline_executions(strategy):
    """GA=4, batch 8, 64 samples: 2 steps per epoch; weights as stock Keras on batch 32 (sum)."""
    x, y = data()
    with strategy.scope():
        first, second = layers()
        inputs = keras.Input((8,))
        with ipu.keras.PipelineStage(0):
            hidden = first(inputs)
        with ipu.keras.PipelineStage(1):
            outputs = second(hidden)
        model = ipu.keras.PipelineModel(
            inputs, outputs, gradient_accumulation_count=4, device_mapping=[0, 1]
        )
        model.compile(keras.optimizers.SGD(0.1 / 4), "mse")
        steps = []
        callback = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda b, logs: steps.append(b)
        )
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
    assert steps == [0, 1]
    assert_weights(model.get_weights(), stock_weights(x, y, 32, 0.1))


def test_pipeline_model_needs_every_layer_in_a_stage(strategy):
    with strategy.scope():
        inputs = keras.Input((8,))
        with ipu.keras.PipelineStage(0):
            hidden = keras.layers.Dense(4, name="staged")(inputs)
        outputs = keras.layers.Dense(2, name="unstaged")(hidden)
        with pytest.raises(ValueError, match="However, unstaged has not been assigned to one"):
            ipu.keras.PipelineModel(inputs, outputs, gradient_accumulation_count=4)


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_pipeline_sequential_matches_pipeline_model(strategy):
    x, y = data()
    with strategy.scope():
        first, second = layers()
        model = ipu.keras.PipelineSequential(
            [[keras.layers.InputLayer((8,)), first], [second]], gradient_accumulation_count=4
        )
        model.compile(keras.optimizers.SGD(0.1 / 4), "mse")
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert_weights(model.get_weights(), stock_weights(x, y, 32, 0.1))
    records = model.get_pipeline_stage_assignment()
    assert [r.pipeline_stage for r in records] == [0, 1]


@pytest.mark.parametrize(
    "stages, message",
    [
        ([], "An IPU pipeline must take a non-empty list of stages"),
        ([["relu"]], "must contain only Keras Layers"),
    ],
)
def test_pipeline_sequential_rejects_bad_stages(strategy, stages, message):
    with strategy.scope(), pytest.raises(ValueError, match=message):
        ipu.keras.PipelineSequential(stages, gradient_accumulation_count=2)


def test_evaluate_and_predict(strategy):
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential([keras.Input((8,)), *layers()])
        model.compile("sgd", "mse")
        reference = keras.Sequential([keras.Input((8,)), *layers()])
        reference.compile("sgd", "mse")
        reference.set_weights(model.get_weights())
        np.testing.assert_allclose(
            model.evaluate(x, y, batch_size=8, verbose=0),
            reference.evaluate(x, y, batch_size=8, verbose=0),
            rtol=1e-5,
        )
        np.testing.assert_allclose(
            model.predict(x, batch_size=8),
            reference.predict(x, batch_size=8, verbose=0),
            rtol=1e-5,
            atol=1e-6,
        )


def test_fit_prefetch_depth_is_the_infeeds_and_is_checked(strategy):
    # The first API's fit(prefetch_depth=...) sizes the infeed of that fit (checked as an
    # IPUInfeedQueue's); the numbers do not change.
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential(layers())
        model.compile(keras.optimizers.SGD(0.1), "mse")
        with pytest.raises(ValueError, match="prefetch_depth"):
            model.fit(x, y, batch_size=8, prefetch_depth=256, verbose=0)
        model.fit(x, y, batch_size=8, shuffle=False, steps_per_run=4, prefetch_depth=8, verbose=0)
        assert model._ipu.infeed_options == {}  # noqa: SLF001 - only for that fit
    assert_weights(model.get_weights(), stock_weights(x, y, 8, 0.1))
