"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/layers/dense_test.py`.

`SerialDense` (serialized along each of its three dimensions, with and without a batch
dimension) gives Keras's Dense outputs and gradients; the addons' `Dense` takes FP8
inputs (`ConvertToF8`) with FP8 weights (kernel, its metadata, bias): weights set and
read back, results like a float16 Keras Dense with the converted kernel, other dtypes as
Keras's Dense, and in functional models and submodels, called or predicted.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python.ipu.ops.f8_ops import Format, create_metadata

from ipu_tensorflow_addons.keras.layers import ConvertFromF8, ConvertToF8, Dense, SerialDense

CASES = [
    ([8, 16], 5, 2, "input_columns"),
    ([4, 21], 8, 3, "input_rows_kernel_columns"),
    ([4, 4], 8, 2, "kernel_rows"),
]
CASES += [([2, *shape], *rest) for shape, *rest in copy.deepcopy(CASES)]

DATA = np.array([[1.0, 2.0], [3.0, -1.0], [-3.0, -5.0]])
METADATA = create_metadata(Format.F143, 0)


@pytest.fixture
def strategy(strategy_on):
    return strategy_on(1)


def _values(input_shape, num_units, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(2.0, 2.0, input_shape)
    kernel = rng.normal(2.0, 2.0, [input_shape[-1], num_units])
    return x, lambda shape, **_: kernel


@pytest.mark.follows("testSerialDense")
@pytest.mark.parametrize("input_shape,num_units,factor,dimension", CASES)
def test_serial_dense(strategy, input_shape, num_units, factor, dimension):
    x, kernel_init = _values(input_shape, num_units, 1)
    with strategy.scope():
        dense = keras.layers.Dense(num_units, kernel_initializer=kernel_init)(x)
        serial = SerialDense(num_units, factor, dimension, kernel_initializer=kernel_init)(x)
    np.testing.assert_allclose(serial, dense, atol=1e-5, rtol=1e-5)


@pytest.mark.follows("testSerializedMatmulGrad")
@pytest.mark.parametrize("input_shape,num_units,factor,dimension", CASES)
def test_serialized_matmul_grad(strategy, input_shape, num_units, factor, dimension):
    x, kernel_init = _values(input_shape, num_units, 2)

    def gradients(layer):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(x))
        return tape.gradient(loss, layer.weights)

    with strategy.scope():
        dense = gradients(keras.layers.Dense(num_units, kernel_initializer=kernel_init))
        serial = gradients(
            SerialDense(num_units, factor, dimension, kernel_initializer=kernel_init)
        )
    for ours, theirs in zip(serial, dense, strict=True):
        np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=1e-5)


def _results_to_compare(arr_ipu, arr_keras):
    """The addons' Dense on `arr_ipu` and a Keras Dense with its weights on `arr_keras`."""
    layer_dtype = "float16" if isinstance(arr_ipu, list) else arr_keras.dtype
    keras_layer = keras.layers.Dense(units=3, dtype=layer_dtype)
    ipu_layer = Dense(units=3, dtype=layer_dtype)
    result = ipu_layer(arr_ipu)
    weights = ipu_layer.get_weights()
    keras_layer(arr_keras)
    kernel = ConvertFromF8()(weights[:2]) if isinstance(arr_ipu, list) else weights[0]
    keras_layer.set_weights([kernel, weights[-1]])
    return result, keras_layer(arr_keras)


@pytest.mark.follows("test_dense_f8_set_get_weights")
def test_dense_f8_set_get_weights(strategy):
    with strategy.scope():
        arr = ConvertToF8()(DATA, METADATA)
        layer = Dense(units=3)
        expected = layer(arr)
        initial = layer.get_weights()
        assert len(initial) == 3
        other = Dense(units=3)
        assert not np.array_equal(expected, other(arr))
        old = other.get_weights()
        assert any(not np.array_equal(a, b) for a, b in zip(old, initial, strict=True))
        other.set_weights(initial)
        for a, b in zip(other.get_weights(), initial, strict=True):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(other(arr), expected)


@pytest.mark.follows("test_dense_f8")
def test_dense_f8(strategy):
    with strategy.scope():
        arr_ipu = ConvertToF8()(tf.convert_to_tensor(DATA), METADATA)
        arr_keras = tf.convert_to_tensor(DATA.astype("float16"))
        result, expected = _results_to_compare(arr_ipu, arr_keras)
    np.testing.assert_allclose(result, expected, rtol=1e-5)


@pytest.mark.follows("test_dense_not_f8")
@pytest.mark.parametrize("tensor_type", ["float16", "float32"])
def test_dense_not_f8(strategy, tensor_type):
    with strategy.scope():
        arr = tf.convert_to_tensor(DATA.astype(tensor_type))
        result, expected = _results_to_compare(arr, arr)
    np.testing.assert_array_equal(result, expected)


def _check_model(model, expected, arr):
    np.testing.assert_array_equal(model(arr), expected)
    np.testing.assert_array_equal(model.predict(arr, batch_size=3, verbose=0), expected)
    model.compile(keras.optimizers.legacy.SGD(learning_rate=0.001), loss="mse")
    np.testing.assert_array_equal(model.predict(arr, batch_size=3, verbose=0), expected)


@pytest.mark.follows("test_dense_f8_functional_model")
def test_dense_f8_functional_model(strategy):
    with strategy.scope():
        layer = Dense(units=3)
        inputs = keras.Input(dtype="float16", shape=[2], batch_size=3)
        model = keras.Model(inputs, layer(ConvertToF8()(inputs, METADATA)))
        arr = tf.convert_to_tensor(DATA.astype("float16"))
        expected = layer(ConvertToF8()(arr, METADATA))
        _check_model(model, expected, arr)


@pytest.mark.follows("test_dense_f8_submodel")
def test_dense_f8_submodel(strategy):
    class TestModel(keras.Model):
        def build(self, input_shape):
            self.metadata = METADATA
            self.convert = ConvertToF8()
            self.dense2 = Dense(units=4)
            super().build(input_shape)

        def call(self, inputs):
            return self.dense2(self.convert(inputs, self.metadata))

    with strategy.scope():
        inputs = keras.Input(dtype="float16", shape=[2], batch_size=3)
        arr = DATA.astype("float16")
        inner = TestModel()
        # The original passed the Input itself; tf_keras's Model.build takes its shape.
        inner.build(input_shape=inputs.shape)
        model = keras.Model(inputs=inputs, outputs=inner(inputs))
        layer = Dense(units=4)
        layer_inputs = ConvertToF8()(arr, METADATA)
        layer(layer_inputs)
        layer.set_weights(model.get_weights())
        expected = layer(layer_inputs)
        _check_model(model, expected, arr)
