"""The errors of the first IPU Keras API, the IPU Keras layers and the keras.ipu optimizer
wrappers are the original's: the same exception types, the original's words where its tests
match them, and no rule the original lacks."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from first_keras_api_models import assert_weights, data, layers, stock_weights
from tensorflow.keras.ipu.optimizers import ALSOptimizer, GradientAccumulationOptimizer
from tensorflow.python import ipu

from ipu_tensorflow_addons.keras.layers import Embedding, LayerNormalization


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


# The first API (tensorflow/python/ipu/keras/model.py, pipeline.py) ----------------------------


def test_numpy_counts_work_as_ints(strategy):
    # The original only does arithmetic with the accumulation count and steps_per_run.
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential(layers(), gradient_accumulation_count=np.int64(4))
        model.compile(keras.optimizers.SGD(0.1 / 4), "mse")
        model.fit(x, y, batch_size=8, shuffle=False, steps_per_run=np.int32(2), verbose=0)
    assert model.gradient_accumulation_count == 4
    assert_weights(model.get_weights(), stock_weights(x, y, 32, 0.1))


def test_compile_takes_steps_per_execution_and_fit_ignores_it(strategy):
    # TF 2.4's Keras compile takes steps_per_execution; the original's model.py passes it on
    # and its on-device loop runs steps_per_run steps whatever it says.
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential(layers())
        model.compile(keras.optimizers.SGD(0.1), "mse", steps_per_execution=3)
        history = model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
    assert len(history.history["loss"]) == 1
    assert_weights(model.get_weights(), stock_weights(x, y, 8, 0.1))


def test_fit_takes_validation_batch_size(strategy):
    # Not among the arguments the original's `_validate_args` refuses (model.py): ignored.
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential(layers())
        model.compile(keras.optimizers.SGD(0.1), "mse")
        model.fit(x, y, batch_size=8, shuffle=False, validation_batch_size=4, verbose=0)
    assert_weights(model.get_weights(), stock_weights(x, y, 8, 0.1))


def test_fit_on_arrays_drops_the_batches_that_do_not_fill_an_execution(strategy, caplog):
    # model.py:356-410 `derive_steps_per_epoch`: 64 samples in batches of 8 with an
    # accumulation count of 2 and 3 steps per run: one execution of 6 batches, the last 2
    # dropped with a warning (never an error).
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential(layers(), gradient_accumulation_count=2)
        model.compile(keras.optimizers.SGD(0.1 / 2), "mse")
        model.fit(x, y, batch_size=8, shuffle=False, steps_per_run=3, verbose=0)
    assert "Samples have been dropped to give a dataset of 6 mini-batches" in caplog.text
    assert_weights(model.get_weights(), stock_weights(x[:48], y[:48], 16, 0.1))


def test_fit_dataset_errors_in_the_originals_words(strategy):
    x, y = data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)
    with strategy.scope():
        model = ipu.keras.Sequential(layers())
        model.compile("sgd", "mse")
        # keras_sequential_pipeline_test.py / keras_functional_model_test.py match these.
        with pytest.raises(ValueError, match="When using an infinitely repeating dataset, you"):
            model.fit(dataset.repeat())
        with pytest.raises(
            ValueError,
            match=r"Steps per epoch times gradient accumulation count \(9 x 1\) is greater than",
        ):
            model.fit(dataset, steps_per_epoch=9)
        # `if batch_size and ...`: a batch size of 0 is no batch size.
        model.fit(dataset, batch_size=0, verbose=0)


def test_sequential_layer_errors_in_the_originals_words():
    with pytest.raises(ValueError, match="IPU Sequential requires a list of Layers"):
        ipu.keras.Sequential(keras.layers.Dense(2))
    # keras_model_test.py testModelBadLayers.
    with pytest.raises(ValueError, match="of Layers may only contain Keras Layers."):
        ipu.keras.Sequential([[keras.layers.Dense(8), keras.layers.Dense(8)]])


@pytest.mark.parametrize(
    "stages, message",
    [
        # keras_sequential_pipeline_test.py testEmptyPipelineCreation, testPipelineBadLayers,
        # testPipelineBadLayersInStage.
        ([], "An IPU pipeline must take a non-empty list of stages"),
        ("dense", "An IPU pipeline must take a non-empty list of stages"),
        ([keras.layers.Dense(8), keras.layers.Dense(8)], " may only contain lists of stages,"),
        ([[keras.layers.Dense(8)], [keras.layers.Dense(8), []]], "must contain only Keras Layers"),
    ],
)
def test_pipeline_sequential_errors_in_the_originals_words(strategy, stages, message):
    with strategy.scope(), pytest.raises(ValueError, match=message):
        ipu.keras.PipelineSequential(stages, gradient_accumulation_count=4)


def _stock():
    model = keras.Sequential([keras.Input((8,)), *layers()])
    model.compile("sgd", "mse")
    return model


def test_evaluate_and_predict_steps_are_accumulation_count_batches(strategy):
    # model.py `_do_internal` serves fit, evaluate and predict: a step is
    # `gradient_accumulation_count` batches (model.py:470-480, 1011), and the results of every
    # batch run are returned (predict) or averaged (evaluate's loss), as a list (evaluate).
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential([keras.Input((8,)), *layers()], gradient_accumulation_count=4)
        model.compile("sgd", "mse")
        one_step = model.predict(x, batch_size=8, steps=1)
        every_step = model.predict(x, batch_size=8)
        whole_steps = model.predict(x[:56], batch_size=8)  # 7 batches: 1 whole step
        loss_one_step = model.evaluate(x, y, batch_size=8, steps=1, verbose=0)
        loss = model.evaluate(x, y, batch_size=8, verbose=0)
    reference = _stock()
    assert one_step.shape == (32, 2) and whole_steps.shape == (32, 2)
    np.testing.assert_allclose(one_step, reference.predict(x[:32], verbose=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(every_step, reference.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    assert isinstance(loss, list) and len(loss) == 1
    np.testing.assert_allclose(
        loss_one_step, [reference.evaluate(x[:32], y[:32], batch_size=8, verbose=0)], rtol=1e-5
    )
    np.testing.assert_allclose(loss, [reference.evaluate(x, y, batch_size=8, verbose=0)], rtol=1e-5)


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_pipeline_model_evaluate_and_predict_datasets_by_the_originals_rules(strategy):
    x, y = data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)
    inputs_only = tf.data.Dataset.from_tensor_slices(x).batch(8, drop_remainder=True)
    with strategy.scope():
        first, second = layers()
        inputs = keras.Input((8,))
        with ipu.keras.PipelineStage(0):
            hidden = first(inputs)
        with ipu.keras.PipelineStage(1):
            outputs = second(hidden)
        model = ipu.keras.PipelineModel(inputs, outputs, gradient_accumulation_count=4)
        model.compile("sgd", "mse")
        one_step = model.predict(inputs_only, steps=1)
        # keras_pipeline_test.py testUint8: steps_per_run=1 still runs every step.
        every_step = model.predict(inputs_only, steps_per_run=1)
        loss = model.evaluate(dataset, steps=1, verbose=0)
        # model.py:490-509: a dataset of known length must hold whole steps (and runs).
        with pytest.raises(ValueError, match=r"\(6\) to be evenly divisible by the gradient"):
            model.predict(inputs_only.take(6))
        with pytest.raises(ValueError, match=r"the product of 'steps_per_run' \(3\), the"):
            model.evaluate(dataset, steps_per_run=3, verbose=0)
        # model.py:348: the steps must not exhaust the dataset.
        with pytest.raises(ValueError, match=r"^Steps times gradient accumulation count \(3 x 4\)"):
            model.predict(inputs_only, steps=3)
    reference = _stock()
    assert one_step.shape == (32, 2) and every_step.shape == (64, 2)
    np.testing.assert_allclose(one_step, reference.predict(x[:32], verbose=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(every_step, reference.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        loss, [reference.evaluate(x[:32], y[:32], batch_size=8, verbose=0)], rtol=1e-5
    )


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_replicated_steps_count_every_replicas_steps(strategy):
    # model.py:432-459, 511: `steps` counts the steps of all replicas.
    x, y = data()
    with strategy.scope():
        model = ipu.keras.Sequential([keras.Input((8,)), *layers()], gradient_accumulation_count=2)
        model.compile("sgd", "mse")
        assert model.predict(x, batch_size=8, steps=2).shape == (32, 2)
        with pytest.raises(ValueError, match=r"'steps' \(3\) to be evenly divisible by the rep"):
            model.predict(x, batch_size=8, steps=3)


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_pipeline_sequential_empty_last_stage_passes_its_inputs_on(strategy):
    # pipeline.py:380-411: a stage applies its layers, none here, to its inputs; it is a
    # stage (an IPU) all the same (pipeline.py:264).
    x, y = data()
    with strategy.scope():
        first, second = layers()
        model = ipu.keras.PipelineSequential(
            [[keras.layers.InputLayer((8,)), first, second], []], gradient_accumulation_count=4
        )
        model.compile(keras.optimizers.SGD(0.1 / 4), "mse")
        model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
        predictions = model.predict(x, batch_size=8)
    assert len(model.layers) == 2
    assert_weights(model.get_weights(), stock_weights(x, y, 32, 0.1))
    reference = _stock()
    reference.set_weights(model.get_weights())
    np.testing.assert_allclose(predictions, reference.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


def test_pipeline_sequential_empty_stage_takes_an_ipu(strategy):
    x, y = data()
    with strategy.scope():
        model = ipu.keras.PipelineSequential(
            [[keras.layers.InputLayer((8,)), *layers()], []], gradient_accumulation_count=4
        )
        model.compile("sgd", "mse")
        with pytest.raises(ValueError, match="the current model requires a multiple of 2 IPUs"):
            model.fit(x, y, batch_size=8, verbose=0)
        # pipelining_ops.py:748: every stage, empty or not, needs a device mapping.
        with pytest.raises(ValueError, match="1 mappings != 2 stages"):
            ipu.keras.PipelineSequential(
                [[keras.layers.Dense(2)], []], gradient_accumulation_count=4, device_mapping=[0]
            )


@pytest.mark.parametrize("ipu_system", [4], indirect=True)
def test_pipeline_sequential_empty_middle_stage(strategy):
    # Three stages (on four IPUs: the shard count is rounded up to a power of two); the
    # grouped schedule of a three-stage training pipeline needs a multiple of 6 batches.
    x, y = data(samples=96)
    with strategy.scope():
        first, second = layers()
        model = ipu.keras.PipelineSequential(
            [[keras.layers.InputLayer((8,)), first], [], [second]], gradient_accumulation_count=6
        )
        model.compile(keras.optimizers.SGD(0.1 / 6), "mse")
        model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
        predictions = model.predict(x, batch_size=8)
    assert [r.pipeline_stage for r in model.get_pipeline_stage_assignment()] == [0, 2]
    assert_weights(model.get_weights(), stock_weights(x, y, 48, 0.1))
    reference = _stock()
    reference.set_weights(model.get_weights())
    np.testing.assert_allclose(predictions, reference.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "stages", [lambda: [[]], lambda: [[keras.layers.InputLayer((8,)), *layers()]]]
)
def test_a_pipeline_of_one_stage_fails_when_it_runs(strategy, stages):
    # The original builds it (pipeline.py checks only the list's types) and its pipeline
    # refuses one stage when fit, evaluate or predict runs (pipelining_ops.py:743).
    x, _ = data()
    with strategy.scope():
        model = ipu.keras.PipelineSequential(stages(), gradient_accumulation_count=4)
        model.compile("sgd", "mse")
        with pytest.raises(ValueError, match="^Pipeline requires at least two computational st"):
            model.predict(x, batch_size=8)


# keras.ipu optimizer wrappers (graphcore/keras keras/ipu/optimizers) ---------------------------


@pytest.mark.parametrize("wrap", [lambda o: GradientAccumulationOptimizer(o, 2), ALSOptimizer])
@pytest.mark.parametrize("inner", [None, "sgd", tf.compat.v1.train.GradientDescentOptimizer(0.1)])
def test_wrapping_what_is_not_a_keras_optimizer_is_an_attribute_error(wrap, inner):
    # optimizer_v2_wrapper.py `__setattr__` reads the wrapped object's `_hyper`.
    with pytest.raises(AttributeError, match="_hyper"):
        wrap(inner)


# IPU Keras layers (ipu_tensorflow_addons/keras/layers) ----------------------------------------


def test_layer_normalization_checks_its_axis_before_unsupported_arguments():
    # normalization.py: the axis first, the unsupported arguments after Keras' __init__.
    with pytest.raises(ValueError, match="Expected an int or a list/tuple of ints"):
        LayerNormalization(axis="last", beta_regularizer="l2")
    with pytest.raises(TypeError):
        LayerNormalization(gamma_constraint="non_neg", not_a_keras_argument=1)
    with pytest.raises(NotImplementedError, match="does not support __init__ argument"):
        LayerNormalization(gamma_constraint="non_neg")


def test_embedding_checks_keras_arguments_before_unsupported_ones():
    # embedding_lookup.py: Keras' __init__ and the initializer, then the unsupported ones.
    with pytest.raises(TypeError):
        Embedding(10, 4, mask_zero=True, not_a_keras_argument=1)
    with pytest.raises(ValueError, match="Unknown initializer"):
        Embedding(10, 4, embeddings_initializer="no_such_initializer", mask_zero=True)
    with pytest.raises(NotImplementedError, match="does not support __init__ argument mask_zero"):
        Embedding(10, 4, mask_zero=True)
