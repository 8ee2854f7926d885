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
