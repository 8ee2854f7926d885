"""Shared by the save-and-restore conformance modules of pipelined models
(pipeline_save_restore_test: functional, sequential_pipeline_save_restore_test:
Sequential): weights saved after fit are restored into a new model, which trains on as
the same model trained on the CPU (stock Keras) would.

The models are pipelined over 2 IPUs with the original's accumulation (24 micro-batches of
one sample, gradients summed), which updates the weights as a CPU model with batches of 24
and 24 times the learning rate. The original's `sgd` (rate 0.01) makes these weights
diverge to infinity in two epochs; here the rate is 0.001, so that they can be compared.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from keras_pipeline_checks import dataset

ACCUMULATION = 24
RATE = 0.001


def fixed_weight_layers():
    """The original's two dense layers (4 then 2 units, kernels of 0.1)."""
    constant = keras.initializers.Constant
    return [
        keras.layers.Dense(4, name="layer0", kernel_initializer=constant(0.1)),
        keras.layers.Dense(2, name="layer1", kernel_initializer=constant(0.1)),
    ]


def optimizer():
    return keras.optimizers.SGD(RATE)


def cpu_weights(make_layers, epochs: int, samples: int) -> list[np.ndarray]:
    """The weights of the plain model trained on the CPU (outside any IPUStrategy) for
    `epochs` on `samples`."""
    model = keras.Sequential([keras.Input((32,)), *make_layers()])
    model.compile(keras.optimizers.SGD(RATE * ACCUMULATION), loss="mse")
    model.fit(dataset(length=samples, batch_size=ACCUMULATION), epochs=epochs, verbose=0)
    return model.get_weights()


def assert_weights(ours, theirs) -> None:
    assert len(ours) == len(theirs) == 4
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def check_can_save_weights(strategy, make_model, make_layers, samples, steps, tmp_path):
    """fit, save the weights, zero them; a new model loads them and trains on."""
    path = os.path.join(tmp_path, "trained_model_weights")
    one_epoch, two_epochs = (cpu_weights(make_layers, n, samples) for n in (1, 2))
    with strategy.scope():
        m = make_model()
        m.compile(optimizer(), loss="mse", steps_per_execution=steps)
        loss = m.fit(dataset(length=samples), epochs=1, verbose=0).history["loss"][0]
    trained = m.get_weights()
    assert_weights(trained, one_epoch)
    m.save_weights(path)
    m.set_weights([np.zeros(w.shape) for w in trained])
    assert all(np.all(w == 0) for w in m.get_weights())
    with strategy.scope():
        m = make_model()
        m.compile(optimizer(), loss="mse", steps_per_execution=steps)
        m.load_weights(path)
        if m.built:  # a Sequential model without an input shape restores when built
            assert_weights(m.get_weights(), trained)
        again = m.fit(dataset(length=samples), epochs=1, verbose=0).history["loss"][0]
    assert again != loss
    assert_weights(m.get_weights(), two_epochs)


def check_training_checkpoint(strategy, make_model, make_layers, samples, steps, tmp_path):
    """A ModelCheckpoint callback saves the weights; a new model restores them from it."""
    path = os.path.join(tmp_path, "ckpt", "model")
    one_epoch, two_epochs = (cpu_weights(make_layers, n, samples) for n in (1, 2))
    with strategy.scope():
        m = make_model()
        m.compile(optimizer(), loss="mse", steps_per_execution=steps)
        saver = keras.callbacks.ModelCheckpoint(filepath=path, save_weights_only=True)
        loss = m.fit(dataset(length=samples), callbacks=[saver], epochs=1, verbose=0)
    assert os.path.isdir(os.path.dirname(path))
    with strategy.scope():
        m = make_model()
        m.compile(optimizer(), loss="mse", steps_per_execution=steps)
        m.load_weights(path)
        if m.built:
            assert_weights(m.get_weights(), one_epoch)
        again = m.fit(dataset(length=samples), epochs=1, verbose=0).history["loss"][0]
    assert again != loss.history["loss"][0]
    assert_weights(m.get_weights(), two_epochs)


def check_invalid_restore_path(strategy, make_model, steps, tmp_path):
    with strategy.scope():
        m = make_model()
        m.compile(optimizer(), loss="mse", steps_per_execution=steps)
        with pytest.raises(tf.errors.NotFoundError, match="Failed to find any matching files"):
            m.load_weights(os.path.join(tmp_path, "random_bad_path"))
