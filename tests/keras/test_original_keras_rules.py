"""Rules of the original's Keras (2.6) that tf_keras 2.21 relaxed, kept once IPU Keras is
in use: the user programs below fail on the original with these errors, and here too."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


def test_inputs_of_different_batch_sizes_make_no_model(strategy):
    first = keras.Input(batch_size=2, shape=(4,))
    second = keras.Input(batch_size=3, shape=(4,))
    joined = keras.layers.Concatenate(axis=0)([first, second])
    with pytest.raises(ValueError) as raised:
        keras.Model([first, second], joined)
    # graphcore/keras keras/engine/functional.py `_validate_graph_inputs_and_outputs`.
    assert str(raised.value) == (
        "The specified batch sizes of the Input Layers are incompatible. Found batch sizes: [2, 3]"
    )
    # Equal or unknown batch sizes are fine.
    third = keras.Input(shape=(4,))
    model = keras.Model([first, third], keras.layers.Add()([first, third]))
    assert model.predict([np.ones((2, 4)), np.ones((2, 4))], verbose=0).tolist() == [[2.0] * 4] * 2


def test_input_errors_name_the_layer_as_the_original(strategy):
    dense = keras.layers.Dense(2, name="projection")
    dense.build((None, 4))
    with pytest.raises(ValueError) as raised:
        dense(tf.ones((1, 3)))
    message = str(raised.value)
    assert message.startswith("Input 0 of layer projection is incompatible with the layer: ")
    assert "(1, 3)" in message

    inputs = [keras.Input((1,)), keras.Input((1,))]
    model = keras.Model(inputs, keras.layers.Add()(inputs), name="pair")
    with pytest.raises(ValueError, match=r"^Layer pair expects 2 input\(s\), but it received 1"):
        model(tf.ones((1, 1)))


def test_a_weight_without_gradient_fails_the_fit(strategy):
    class WithUnusedWeight(keras.layers.Dense):
        def build(self, input_shape):
            super().build(input_shape)
            self.unused = self.add_weight("unused", shape=(), initializer="ones")

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 4)), rng.normal(size=(8, 2))
    with strategy.scope():
        model = keras.Sequential([WithUnusedWeight(2, input_shape=(4,))])
        model.compile(keras.optimizers.SGD(0.1), "mse")
        # graphcore/keras keras/ipu/extensions/extensions_base.py takes the gradients
        # from the optimizer's `get_gradients`, which refuses a missing one.
        with pytest.raises(ValueError, match=r"Variable .*unused:0.* has `None` for gradient\."):
            model.fit(x, y, batch_size=4, verbose=0)

        # A TF1 optimizer gets the pairs as they are (TFOptimizer.get_grads): the weight
        # without a gradient is left alone, the others train as in stock Keras.
        model = keras.Sequential([WithUnusedWeight(2, input_shape=(4,))])
        model.compile(tf.compat.v1.train.GradientDescentOptimizer(0.1), "mse")
        before = model.get_weights()
        model.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    reference = keras.Sequential([keras.layers.Dense(2, input_shape=(4,))])
    reference.set_weights(before[:2])
    reference.compile(keras.optimizers.SGD(0.1), "mse")
    reference.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    kernel, bias, unused = model.get_weights()
    np.testing.assert_allclose(kernel, reference.get_weights()[0], rtol=1e-5)
    np.testing.assert_allclose(bias, reference.get_weights()[1], rtol=1e-5)
    assert unused == 1.0
