"""Layer extensions registered with an IPUStrategy (the original's keras_extensions.py and
Keras fork's base_layer.extension_delegate): a layer made in the strategy's scope gets
the extension mixed into its class, and its delegating methods call the extension."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu
from tf_keras.src.engine import base_layer


class ScaledDense(keras.layers.Dense):
    @base_layer.extension_delegate
    def call(self, inputs, training=None):
        return super().call(inputs)


class DoubledOutputs(base_layer.KerasExtension):
    def __init__(self):
        self.delegated_calls = 0

    def _call_supported(self, inputs, training=None):
        return inputs.shape[-1] == 3  # only three features go to the extension

    def _call_delegate(self, inputs, training=None):
        self.delegated_calls += 1
        return 2.0 * self.call(inputs, training, __extension_delegate=False)


@pytest.fixture
def strategy(ipu_system):
    strategy = ipu.ipu_strategy.IPUStrategy()
    strategy._register_keras_extension(ScaledDense, base_layer.KerasExtension, DoubledOutputs)
    return strategy


def test_a_layer_made_in_the_scope_calls_its_extension(strategy):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with strategy.scope():
        layer = ScaledDense(2, kernel_initializer="ones")
        plain = keras.layers.Dense(2, kernel_initializer="ones")
        model = keras.Sequential([layer])
        predicted = model.predict(x, batch_size=2, verbose=0)
    outside = ScaledDense(2, kernel_initializer="ones")
    # The layer's class keeps its name, mixes in the extension, and sums ones: 2 * sum(x).
    assert type(layer).__name__ == "ScaledDense" and isinstance(layer, DoubledOutputs)
    assert not isinstance(plain, DoubledOutputs) and not isinstance(outside, DoubledOutputs)
    np.testing.assert_allclose(predicted, 2.0 * x.sum(axis=1, keepdims=True).repeat(2, 1))
    assert layer.delegated_calls >= 1
    np.testing.assert_allclose(outside(x), x.sum(axis=1, keepdims=True).repeat(2, 1))


def test_unsupported_arguments_call_the_layers_own_method(strategy):
    x = np.ones([2, 4], np.float32)
    with strategy.scope():
        layer = ScaledDense(1, kernel_initializer="ones")
    np.testing.assert_allclose(layer(x), [[4.0], [4.0]])  # four features: not supported
    assert layer.delegated_calls == 0


def test_a_layer_made_from_its_config_gets_the_extension_too(strategy):
    with strategy.scope():
        layer = ScaledDense(2)
        copy = type(layer).from_config(layer.get_config())
    assert isinstance(copy, DoubledOutputs) and copy.delegated_calls == 0


def test_a_second_extension_of_the_same_kind_is_refused(strategy):
    class Other(base_layer.KerasExtension):
        pass

    with strategy.scope():
        layer = ScaledDense(2)
    strategy._register_keras_extension(keras.layers.Dense, base_layer.KerasExtension, Other)
    other = ipu.ipu_strategy.IPUStrategy()
    other._register_keras_extension(keras.layers.Dense, base_layer.KerasExtension, Other)
    # keras_extensions.py's message: the layer already mixes in another extension.
    with pytest.raises(RuntimeError, match="already patched with a different extension"):
        other._patch_keras_extension(layer)
    strategy._delete_keras_extension(ScaledDense, base_layer.KerasExtension)
    assert strategy._get_keras_extension(ScaledDense, base_layer.KerasExtension) is None


def test_extension_delegate_if_exists_asks_the_extension(strategy):
    class Counting(base_layer.KerasExtension):
        def _count_supported(self, n):
            return n > 0

        def _count_delegate(self, n):
            return n * 10

    strategy._delete_keras_extension(ScaledDense, base_layer.KerasExtension)
    strategy._register_keras_extension(ScaledDense, base_layer.KerasExtension, Counting)
    with strategy.scope():
        layer = ScaledDense(1)
    assert base_layer.check_if_extension_delegate_exists("count", layer)
    assert base_layer.extension_delegate_if_exists("count", layer, 3) == 30
    assert base_layer.extension_delegate_if_exists("count", layer, 0) is None
    assert not base_layer.check_if_extension_delegate_exists("count", tf.Module())
