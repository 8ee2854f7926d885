"""Conformance: graphcore/keras `keras/ipu/sequential_replication_test.py`.

A replicated (4 replicas) Sequential model predicts every sample of numpy data; a model
trained on the CPU predicts the same on 2 replicas, after `load_weights` and after
`load_model` in an IPUStrategy scope (which gives a model with the IPU extensions).
Random 4x4 images and a short training replace the original's MNIST.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tf_keras.ipu import extensions


def _dense(units, name):
    return keras.layers.Dense(units, name=name, kernel_initializer=keras.initializers.Constant(0.1))


@pytest.mark.follows("testPredictWithNumpyDataBs2Replicas4")
def test_predict_with_numpy_data_bs2_replicas4(strategy_on):
    strategy = strategy_on(4)
    with strategy.scope():
        model = keras.Sequential([_dense(4, "layer0"), _dense(2, "layer1")])
        model.compile(keras.optimizers.legacy.SGD(0.001), loss="mse", steps_per_execution=4)
        result = model.predict(np.full([96, 32], 1.0, np.single), batch_size=2, verbose=0)
    assert type(result) is np.ndarray
    np.testing.assert_allclose(result, np.full((96, 2), 32 * 0.1 * 0.1 * 4), rtol=1e-6)


def _layers():
    return [
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ]


def _compiled(model):
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=["accuracy"],
        optimizer=keras.optimizers.legacy.SGD(),
        steps_per_execution=8,
    )
    return model


@pytest.mark.follows("testCompareMnistPredictionsWithCpu")
def test_compare_mnist_predictions_with_cpu(strategy_on, tmp_path):
    rng = np.random.default_rng(5)
    x = rng.uniform(size=(512, 4, 4, 1)).astype(np.float32)
    y = rng.integers(0, 10, size=(512,)).astype(np.float32)
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(32, drop_remainder=True).repeat()
    predict = tf.data.Dataset.from_tensor_slices(x).batch(32, drop_remainder=True)

    model = _compiled(keras.Sequential(_layers()))
    model.fit(train, epochs=2, steps_per_epoch=16, verbose=0)
    cpu_predictions = model.predict(predict, steps=16, verbose=0)

    model.save_weights(str(tmp_path / "weights.hd5"))
    strategy = strategy_on(2)
    with strategy.scope():
        ipu_model = _compiled(keras.Sequential(_layers()))
        ipu_model.load_weights(str(tmp_path / "weights.hd5")).expect_partial()
        np.testing.assert_allclose(
            ipu_model.predict(predict, steps=16, verbose=0), cpu_predictions, rtol=1e-5, atol=1e-6
        )

    model.save(str(tmp_path / "model"))
    with strategy.scope():
        ipu_model = keras.models.load_model(str(tmp_path / "model"))
        assert isinstance(ipu_model, extensions.extensions_base.KerasExtensionBase)
        ipu_model.compile(steps_per_execution=8)
        np.testing.assert_allclose(
            ipu_model.predict(predict, steps=16, verbose=0), cpu_predictions, rtol=1e-5, atol=1e-6
        )
