"""Conformance: graphcore/keras `keras/ipu/model_replication_mnist_test.py`.

A functional model trained on the CPU predicts the same on 4 replicas, after
`load_weights` and after `load_model` in an IPUStrategy scope (which gives a model with
the IPU extensions). Random 28x28 images, labelled by a fixed rule, and a short training
replace the original's MNIST download (there is no network).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tf_keras.ipu import extensions


def _model():
    inputs = keras.layers.Input(shape=(28, 28, 1), dtype="float32", batch_size=32)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(32, activation="relu")(x)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(x))
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=["accuracy"],
        optimizer=keras.optimizers.legacy.SGD(),
        steps_per_execution=4,
    )
    return model


def _datasets():
    rng = np.random.default_rng(11)
    x = rng.uniform(size=(32 * 16, 28, 28, 1)).astype(np.float32)
    # A label the model can learn: which tenth of the range the image's mean falls in.
    y = np.clip(((x.mean(axis=(1, 2, 3)) - 0.45) * 100).astype(int), 0, 9).astype(np.float32)
    train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512, seed=1)
    train = train.batch(32, drop_remainder=True).repeat()
    predict = tf.data.Dataset.from_tensor_slices(x[: 12 * 32]).batch(32, drop_remainder=True)
    return train, predict


@pytest.mark.follows("testCompareMnistPredictionsWithCpu")
def test_compare_mnist_predictions_with_cpu(strategy_on, tmp_path):
    train, predict = _datasets()
    model = _model()
    model.fit(train, epochs=2, steps_per_epoch=16, verbose=0)
    cpu_predictions = model.predict(predict, steps=12, verbose=0)

    weights_file = str(tmp_path / "weights.hd5")
    model.save_weights(weights_file)
    strategy = strategy_on(4)
    with strategy.scope():
        ipu_model = _model()
        ipu_model.load_weights(weights_file).expect_partial()
        ipu_predictions = ipu_model.predict(predict, steps=12, verbose=0)
    np.testing.assert_allclose(ipu_predictions, cpu_predictions, rtol=1e-5, atol=1e-6)

    model_file = str(tmp_path / "model")
    model.save(model_file)
    with strategy.scope():
        ipu_model = keras.models.load_model(model_file)
        assert isinstance(ipu_model, extensions.extensions_base.KerasExtensionBase)
        ipu_model.compile(steps_per_execution=4)
        ipu_predictions = ipu_model.predict(predict, steps=12, verbose=0)
    np.testing.assert_allclose(ipu_predictions, cpu_predictions, rtol=1e-5, atol=1e-6)
