"""Shared by the first IPU Keras API's tests: data, the two-layer model's layers, the same
model trained by stock Keras, and the weight comparison."""

from __future__ import annotations

import numpy as np
import tf_keras as keras


def data(samples=64, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(samples, 8)).astype(np.float32),
        rng.normal(size=(samples, 2)).astype(np.float32),
    )


def layers():
    keras.utils.set_random_seed(5)
    return [keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(2)]


def stock_weights(x, y, batch_size, learning_rate, epochs=1):
    model = keras.Sequential([keras.Input((8,)), *layers()])
    model.compile(keras.optimizers.SGD(learning_rate), "mse")
    model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    return model.get_weights()


def assert_weights(ours, theirs):
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
