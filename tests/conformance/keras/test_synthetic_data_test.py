"""Conformance: graphcore/keras `keras/ipu/synthetic_data_test.py`.

With `--use_synthetic_data` in `TF_POPLAR_FLAGS`, a three-input two-output functional
model fits, evaluates and predicts (nested outputs too, and with 2 replicas). The
original only checks that these run; here also that the results are what its Keras
reports with synthetic outfeeds (keras/ipu/extensions/extensions_base.py
`_get_last_batch_results`/`_get_all_batch_results`): zeros of the results' shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras


@pytest.fixture
def synthetic(monkeypatch):
    import os

    flags = os.environ.get("TF_POPLAR_FLAGS", "")
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"{flags} --use_synthetic_data")


def _dataset_with_labels():
    x = tuple(np.ones(8) for _ in range(3))
    y = (np.ones(1), np.ones(1))

    ds = tf.data.Dataset.zip((tf.data.Dataset.from_tensors(x), tf.data.Dataset.from_tensors(y)))
    return ds.repeat(16).batch(2, drop_remainder=True)


def _numpy_data():
    return tuple(np.ones((2, 8)) for _ in range(3))


def _model(nested_outputs=False):
    inputs = [keras.Input(8) for _ in range(3)]
    cat = keras.layers.Concatenate()(inputs)
    init = keras.initializers.Constant(1)
    out1 = keras.layers.Dense(1, kernel_initializer=init, activation="relu", name="output1")(cat)
    out2 = keras.layers.Dense(2, kernel_initializer=init, activation="relu", name="output2")(cat)
    outputs = ((out1,), (out2,)) if nested_outputs else (out1, out2)
    model = keras.Model(tuple(inputs), outputs)
    model.compile("sgd", ["mse", "mse"], metrics=["accuracy"])
    return model


@pytest.mark.follows("testSyntheticDataFit")
def test_synthetic_data_fit(synthetic, strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        history = _model().fit(_dataset_with_labels(), epochs=4, verbose=0)
    assert len(history.history["loss"]) == 4
    assert history.history["loss"] == [0.0] * 4


@pytest.mark.follows("testSyntheticDataEvaluate")
def test_synthetic_data_evaluate(synthetic, strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        results = _model().evaluate(_dataset_with_labels(), verbose=0)
    assert results == [0.0] * 5  # the loss, two output losses, two accuracies


@pytest.mark.follows("testSyntheticDataPredict")
def test_synthetic_data_predict(synthetic, strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        out1, out2 = _model().predict(_numpy_data(), batch_size=2, verbose=0)
    np.testing.assert_array_equal(out1, np.zeros((2, 1)))
    np.testing.assert_array_equal(out2, np.zeros((2, 2)))


@pytest.mark.follows("testSyntheticDataPredictNestedOutput")
def test_synthetic_data_predict_nested_output(synthetic, strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        ((out1,), (out2,)) = _model(nested_outputs=True).predict(
            _numpy_data(), batch_size=2, verbose=0
        )
    np.testing.assert_array_equal(out1, np.zeros((2, 1)))
    np.testing.assert_array_equal(out2, np.zeros((2, 2)))


@pytest.mark.follows("testSyntheticDataWithReplication")
def test_synthetic_data_with_replication(synthetic, strategy_on):
    strategy = strategy_on(2)
    with strategy.scope():
        model = _model()
        model.compile("sgd", ["mse", "mse"], metrics=["accuracy"], steps_per_execution=8)
        history = model.fit(_dataset_with_labels(), epochs=4, verbose=0)
    assert history.history["loss"] == [0.0] * 4
