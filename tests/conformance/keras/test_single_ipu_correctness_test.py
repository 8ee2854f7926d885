"""Conformance: graphcore/keras `keras/ipu/extensions/single_ipu/correctness_test.py`.

Numbers inside an IPUStrategy, against values worked out by hand: a model that only adds
a bias (zero at first) trained by SGD(0.1) on the mean absolute error loses 0.1 per epoch,
evaluates to the mean distance and predicts its input; a model adding its three inputs
(subclassed and functional) the same.
"""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras
from single_ipu_checks import MODEL_TYPES, assert_close, model_from_layers

pytestmark = pytest.mark.usefixtures("ipu_scope")


class Bias(keras.layers.Layer):
    """Keras's `testing_utils.Bias`: adds a trainable bias, zero at first."""

    def build(self, input_shape):
        self.bias = self.add_weight("bias", (1,), initializer="zeros")

    def call(self, inputs):
        return inputs + self.bias


class MultiInputSubclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.add = keras.layers.Add()
        self.bias = Bias()

    def call(self, inputs):
        return self.bias(self.add(inputs))


def _multi_input_functional():
    inputs = [keras.Input(shape=(1,)) for _ in range(3)]
    return keras.Model(inputs, Bias()(keras.layers.Add()(inputs)))


def _compiled(model):
    model.compile(keras.optimizers.SGD(0.1), "mae")
    return model


def _bias_model(model_type):
    return _compiled(model_from_layers([Bias()], (1,), model_type))


def _multiple_input_model(subclassed):
    return _compiled(MultiInputSubclassed() if subclassed else _multi_input_functional())


X = np.array([[0.0], [1.0], [2.0]])
THREE_INPUTS = [
    np.array([[1.0], [2.0], [3.0]]),
    np.array([[4.0], [5.0], [6.0]]),
    np.array([[7.0], [8.0], [9.0]]),
]
LOSSES = [1.0, 0.9, 0.8, 0.7, 0.6]


@pytest.mark.follows("test_simple_bias_fit")
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_simple_bias_fit(model_type):
    history = _bias_model(model_type).fit(
        X, np.array([[0.5], [2.0], [3.5]]), batch_size=3, epochs=5, verbose=0
    )
    assert_close(history.history["loss"], LOSSES)


@pytest.mark.follows("test_simple_bias_evaluate")
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_simple_bias_evaluate(model_type):
    loss = _bias_model(model_type).evaluate(
        X, np.array([[1.0], [3.0], [5.0]]), batch_size=1, verbose=0
    )
    assert_close(loss, 2.0)


@pytest.mark.follows("test_simple_bias_predict")
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_simple_bias_predict(model_type):
    assert_close(_bias_model(model_type).predict(X, batch_size=1, verbose=0), X)


@pytest.mark.follows("test_multiple_input_fit")
@pytest.mark.parametrize("subclassed", [True, False])
def test_multiple_input_fit(subclassed):
    history = _multiple_input_model(subclassed).fit(
        THREE_INPUTS, np.array([[12.5], [16.0], [19.5]]), batch_size=3, epochs=5, verbose=0
    )
    assert_close(history.history["loss"], LOSSES)


@pytest.mark.follows("test_multiple_input_evaluate")
@pytest.mark.parametrize("subclassed", [True, False])
def test_multiple_input_evaluate(subclassed):
    loss = _multiple_input_model(subclassed).evaluate(
        THREE_INPUTS, np.array([[13.0], [17.0], [21.0]]), batch_size=3, verbose=0
    )
    assert_close(loss, 2.0)


@pytest.mark.follows("test_multiple_input_predict")
@pytest.mark.parametrize("subclassed", [True, False])
def test_multiple_input_predict(subclassed):
    predicted = _multiple_input_model(subclassed).predict(THREE_INPUTS, batch_size=1, verbose=0)
    assert_close(predicted, [[12.0], [15.0], [18.0]])
