"""Helpers shared by the ports of graphcore/keras `keras/ipu/extensions/single_ipu/`.

Those files are stock Keras tests run inside an IPUStrategy on one IPU (their `setUp`
configures a one-IPU system and enters the strategy's scope): the `ipu_scope` fixture of
this folder's conftest does the same.
`model_from_layers` stands in for Keras's `testing_utils.get_model_from_layers` (the
`run_with_all_model_types` decorator's three kinds of model).
"""

from __future__ import annotations

import concurrent.futures

import numpy as np
import tf_keras as keras

MODEL_TYPES = ["sequential", "functional", "subclass"]


class _Subclassed(keras.Model):
    def __init__(self, layers):
        super().__init__()
        self.model_layers = layers

    def call(self, inputs):
        x = inputs
        for layer in self.model_layers:
            x = layer(x)
        return x


def model_from_layers(layers, input_shape, model_type, input_dtype=None):
    """The layers chained as a Sequential, functional or subclassed model."""
    if model_type == "sequential":
        model = keras.Sequential()
        model.add(keras.layers.InputLayer(input_shape=input_shape, dtype=input_dtype))
        for layer in layers:
            model.add(layer)
        return model
    if model_type == "functional":
        inputs = keras.Input(shape=input_shape, dtype=input_dtype)
        x = inputs
        for layer in layers:
            x = layer(x)
        return keras.Model(inputs, x)
    return _Subclassed(layers)


def small_mlp(num_hidden, num_classes, input_dim, model_type):
    """Keras's `testing_utils.get_small_mlp`."""
    activation = "relu" if num_classes > 1 else "sigmoid"
    last = "softmax" if num_classes > 1 else "sigmoid"
    layers = [
        keras.layers.Dense(num_hidden, activation=activation),
        keras.layers.Dense(num_classes, activation=last),
    ]
    return model_from_layers(layers, (input_dim,), model_type)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=rtol, atol=atol)


def stock(fn, *args):
    """`fn(*args)` in stock Keras: on a thread of its own, outside the test's IPUStrategy
    scope (a strategy scope belongs to the thread that entered it)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()
