"""Conformance: graphcore/keras `keras/ipu/extensions/single_ipu/deferred_sequential_test.py`.

Sequential models built late (on their first call, `build` or `fit`) inside an
IPUStrategy: they become graph networks of the right shapes, layers can be popped and
added, they save and load (SavedModel and HDF5) with their weights, and a layer's own
loss is the training loss (the original's values: the sum of the inputs).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from single_ipu_checks import assert_close

pytestmark = pytest.mark.usefixtures("ipu_scope")


def _model():
    model = keras.Sequential()
    model.add(keras.layers.Dense(2, name="first_layer"))
    model.add(keras.layers.Dropout(0.3, name="dp"))
    model.add(keras.layers.Dense(2, name="last_layer"))
    return model


def _check_graph_network(model, input_shape, output_shape):
    assert len(model.weights) == 4
    assert model._is_graph_network
    assert len(model.inputs) == 1 and len(model.outputs) == 1
    assert model.inputs[0].shape.as_list() == input_shape
    assert model.outputs[0].shape.as_list() == output_shape


@pytest.mark.follows("test_build_behavior")
def test_build_behavior():
    model = _model()
    model(np.random.random((2, 6)))
    _check_graph_network(model, [2, 6], [2, 2])
    for batch in (3, 4):  # a call of another batch size makes the batch dynamic
        model(np.random.random((batch, 6)))
        _check_graph_network(model, [None, 6], [None, 2])

    model = _model()
    model.build((None, 6))
    _check_graph_network(model, [None, 6], [None, 2])

    model = _model()
    model.compile(loss="mse", optimizer="rmsprop", metrics=[keras.metrics.CategoricalAccuracy()])
    model.fit(np.zeros((32, 6)), np.zeros((32, 2)), verbose=0)
    assert len(model.weights) == 4
    assert model._is_graph_network
    assert model.inputs[0].shape.as_list()[-1] == 6
    assert model.outputs[0].shape.as_list()[-1] == 2


@pytest.mark.follows("test_add_and_pop")
def test_add_and_pop():
    model = _model()
    model.build((None, 6))
    assert model.built and model._is_graph_network
    assert (len(model.layers), len(model.weights)) == (3, 4)
    model.pop()
    assert model.built and model._is_graph_network
    assert (len(model.layers), len(model.weights)) == (2, 2)
    model.add(keras.layers.Dense(2))
    assert model.built and model._is_graph_network
    assert (len(model.layers), len(model.weights)) == (3, 4)


def _check_save_and_load(path):
    model = _model()
    model(np.random.random((3, 6)))  # builds the model
    model.save(path)
    loaded = keras.models.load_model(path)
    ours = model._flatten_layers(include_self=True, recursive=False)
    theirs = loaded._flatten_layers(include_self=True, recursive=False)
    for layer, loaded_layer in zip(ours, theirs, strict=True):
        assert layer.name == loaded_layer.name
        for weight, loaded_weight in zip(layer.weights, loaded_layer.weights, strict=True):
            assert_close(loaded_weight.numpy(), weight.numpy())


@pytest.mark.follows("test_saving_savedmodel")
def test_saving_savedmodel(tmp_path):
    _check_save_and_load(str(tmp_path / "model_path"))


@pytest.mark.follows("test_saving_h5")
def test_saving_h5(tmp_path):
    _check_save_and_load(str(tmp_path / "model_path.h5"))


class LossLayer(keras.layers.Layer):
    def call(self, inputs):
        self.add_loss(tf.reduce_sum(inputs))
        return inputs


@pytest.mark.follows("test_loss_layer")
def test_loss_layer():
    model = keras.Sequential([LossLayer()])
    model.compile("rmsprop")
    assert_close(model.train_on_batch(np.ones((2, 2))), 4.0)
    model(np.random.random((4, 2)))  # triggers a rebuild
    assert_close(model.train_on_batch(np.ones((1, 2))), 2.0)

    model = keras.Sequential([keras.layers.Dense(1, kernel_initializer="ones"), LossLayer()])
    model.compile("rmsprop")
    assert_close(model.train_on_batch(np.ones((2, 2))), 4.0)
    model(np.random.random((4, 2)))
    assert model.train_on_batch(np.ones((1, 2))) < 2.0

    model = keras.Sequential([keras.layers.Dense(1, kernel_initializer="ones"), LossLayer()])
    model.compile("rmsprop", "mse")
    model.train_on_batch(np.ones((2, 2)), np.ones((2, 2)))
    model(np.random.random((4, 2)))
    loss = model.train_on_batch(np.ones((1, 2)), np.ones((1, 2)))
    assert np.isfinite(loss)
