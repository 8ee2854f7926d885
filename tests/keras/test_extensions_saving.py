"""Saving and loading Keras models built in an IPUStrategy scope."""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras
from tensorflow.python import ipu

from openipu._src.keras.extensions.model_extensions import KerasExtensions


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


# The saved model is a two-stage pipeline: its device needs two IPUs.
pytestmark = pytest.mark.parametrize("ipu_system", [2], indirect=True)


def _trained(strategy):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 8)).astype(np.float32)
    y = rng.normal(size=(64, 2)).astype(np.float32)
    with strategy.scope():
        inputs = keras.Input((8,))
        with keras.ipu.PipelineStage(0):
            hidden = keras.layers.Dense(16, activation="relu")(inputs)
        with keras.ipu.PipelineStage(1):
            outputs = keras.layers.Dense(2)(hidden)
        model = keras.Model(inputs, outputs)
        model.compile(keras.optimizers.SGD(0.05), "mse", steps_per_execution=4)
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=2, device_mapping=[1, 0]
        )
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    return model, x


@pytest.mark.parametrize("suffix", [".h5", ""], ids=["h5", "savedmodel"])
def test_save_and_load_in_the_scope_keeps_weights_and_ipu_options(strategy, tmp_path, suffix):
    model, x = _trained(strategy)
    path = str(tmp_path / f"model{suffix}")
    model.save(path)
    with strategy.scope():
        loaded = keras.models.load_model(path)
    assert isinstance(loaded, KerasExtensions)
    for ours, theirs in zip(loaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    if suffix == ".h5":
        assert loaded._ipu.pipelining_steps == 2  # noqa: SLF001
        assert loaded._ipu.pipelining_device_mapping == [1, 0]  # noqa: SLF001
    np.testing.assert_allclose(
        loaded.predict(x, batch_size=8, verbose=0),
        model.predict(x, batch_size=8, verbose=0),
        rtol=1e-6,
    )


@pytest.mark.parametrize("suffix", [".h5", ""], ids=["h5", "savedmodel"])
def test_saved_model_loads_into_stock_keras(strategy, tmp_path, suffix):
    model, x = _trained(strategy)
    path = str(tmp_path / f"model{suffix}")
    model.save(path)
    stock = keras.models.load_model(path)
    assert not isinstance(stock, KerasExtensions)
    with strategy.scope():
        expected = model.predict(x, batch_size=8, verbose=0)
    np.testing.assert_allclose(
        stock.predict(x, batch_size=8, verbose=0), expected, rtol=1e-5, atol=1e-6
    )


def test_weights_load_into_a_stock_model_with_the_same_layers(strategy, tmp_path):
    model, x = _trained(strategy)
    model.save_weights(str(tmp_path / "weights.h5"))
    stock = keras.Sequential(
        [keras.layers.Dense(16, activation="relu", input_shape=(8,)), keras.layers.Dense(2)]
    )
    stock.load_weights(str(tmp_path / "weights.h5"))
    for ours, theirs in zip(stock.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_save_weights_and_load_weights_round_trip(strategy, tmp_path):
    model, _ = _trained(strategy)
    model.save_weights(str(tmp_path / "checkpoint"))
    with strategy.scope():
        again, _ = _trained(strategy)
        for variable in again.trainable_variables:
            variable.assign(variable * 0)
        again.load_weights(str(tmp_path / "checkpoint"))
    for ours, theirs in zip(again.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(ours, theirs)
