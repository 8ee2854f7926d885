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
        # Two training stages need a multiple of 4 accumulated batches (pipeline_visitor.cc).
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=4, device_mapping=[1, 0]
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
        assert loaded._ipu.pipelining_steps == 4  # noqa: SLF001
        assert loaded._ipu.pipelining_device_mapping == [1, 0]  # noqa: SLF001
    # Keras saves no steps_per_execution: predicting through the 2 stages needs an even
    # number of steps per execution again (the original's pipeline_visitor.cc).
    with strategy.scope():
        loaded.compile(keras.optimizers.SGD(0.05), "mse", steps_per_execution=4)
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


# -- The IPU options in the config, as the original saves them ---------------------------------


def _options_model(strategy, kind):
    with strategy.scope():
        if kind == "sequential":
            model = keras.Sequential(
                [keras.layers.Dense(16, activation="relu", input_shape=(8,)), keras.layers.Dense(2)]
            )
            model.set_pipeline_stage_assignment([0, 1])
        else:
            inputs = keras.Input((8,))
            hidden = keras.layers.Dense(16, activation="relu")(inputs)
            outputs = keras.layers.Dense(2)(hidden)
            model = keras.Model(inputs, outputs)
            assignment = model.get_pipeline_stage_assignment()
            assignment[0].pipeline_stage = 0
            assignment[1].pipeline_stage = 1
            model.set_pipeline_stage_assignment(assignment)
        model.compile(keras.optimizers.SGD(0.05), "mse", steps_per_execution=4)
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=4,
            device_mapping=[1, 0],
            accumulate_outfeed=True,
            gradient_accumulation_reduction_method="mean",
        )
        model.set_asynchronous_callbacks(True)
        model.set_replication_options("SUM")
        model.set_infeed_queue_options(prefetch_depth=2)
        model.set_outfeed_queue_options(buffer_depth=2)
    return model


@pytest.mark.parametrize("kind", ["sequential", "functional"])
def test_get_config_holds_the_options_under_the_original_keys(strategy, kind):
    # keras/ipu/extensions/extensions_base.py `_get_base_config`, and the stage assignment of
    # the model's `_get_config_delegate`.
    config = _options_model(strategy, kind).get_config()
    assert config["pipelining_gradient_accumulation_steps_per_replica"] == 4
    assert config["pipelining_device_mapping"] == [1, 0]
    assert config["pipelining_accumulate_outfeed"] is True
    assert config["gradient_accumulation_reduction_method"] == 1  # MEAN
    assert config["replicated_metric_reduction_method"] == 3  # the original's SUM
    assert config["asynchronous_callbacks"] is True
    assert config["infeed_kwargs"] == {"prefetch_depth": 2}
    assert config["outfeed_kwargs"] == {"buffer_depth": 2}
    expected = [0, 1] if kind == "sequential" else [(1, 0, 0), (2, 0, 1)]
    assert config["pipeline_stage_assignment"] == expected


@pytest.mark.parametrize("kind", ["sequential", "functional"])
@pytest.mark.parametrize("suffix", [".h5", ""], ids=["h5", "savedmodel"])
def test_load_model_restores_every_ipu_option(strategy, tmp_path, kind, suffix):
    # keras/ipu/feed_options_test.py and extensions_save_load_test.py: saved, then loaded in
    # the strategy's scope, the model has its options and its pipeline back.
    model = _options_model(strategy, kind)
    path = str(tmp_path / f"model{suffix}")
    model.save(path)
    with strategy.scope():
        loaded = keras.models.load_model(path)
    state = loaded._ipu  # noqa: SLF001
    assert state.pipelining_steps == 4 and state.pipelining_device_mapping == [1, 0]
    assert state.pipelining_accumulate_outfeed is True
    assert state.pipelining_reduction.name == "MEAN"
    assert state.asynchronous_callbacks is True
    assert state.replicated_metric_reduction.name == "SUM"
    assert state.infeed_options == {"prefetch_depth": 2}
    assert state.outfeed_options == {"buffer_depth": 2}
    stages = [r.pipeline_stage for r in loaded.get_pipeline_stage_assignment()]
    assert stages == [0, 1]
    # And it trains as the original would: the same numbers as the saved model.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(32, 8)).astype(np.float32)
    y = rng.normal(size=(32, 2)).astype(np.float32)
    with strategy.scope():
        loaded.compile(keras.optimizers.SGD(0.05), "mse", steps_per_execution=4)
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
        loaded.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    for ours, theirs in zip(loaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_gradient_accumulation_options_come_back_with_the_model(strategy, tmp_path):
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
        model.compile(keras.optimizers.SGD(0.1), "mse", steps_per_execution=4)
        model.set_gradient_accumulation_options(
            gradient_accumulation_steps_per_replica=2,
            gradient_accumulation_reduction_method="running_mean",
        )
    path = str(tmp_path / "model.h5")
    model.save(path)
    with strategy.scope():
        loaded = keras.models.load_model(path)
    assert loaded._ipu.gradient_accumulation_steps == 2  # noqa: SLF001
    assert loaded._ipu.gradient_accumulation_reduction.name == "RUNNING_MEAN"  # noqa: SLF001


def test_a_config_saved_by_the_original_loads_with_its_options(strategy):
    # The keys and values the original's get_config writes (functional_extensions.py).
    with strategy.scope():
        inputs = keras.Input((4,))
        outputs = keras.layers.Dense(3)(keras.layers.Dense(5)(inputs))
        config = keras.Model(inputs, outputs).get_config()
    for key in [k for k in config if k not in ("name", "layers", "input_layers", "output_layers")]:
        del config[key]
    config.update(
        gradient_accumulation_steps_per_replica=None,
        gradient_accumulation_reduction_method=0,
        replicated_metric_reduction_method=1,
        asynchronous_callbacks=False,
        pipelining_gradient_accumulation_steps_per_replica=8,
        pipelining_device_mapping=None,
        pipelining_accumulate_outfeed=None,
        infeed_kwargs={},
        outfeed_kwargs={},
        pipeline_stage_assignment=[[1, 0, 0], [2, 0, 1]],
    )
    with strategy.scope():
        loaded = keras.Model.from_config(config)
    assert loaded._ipu.pipelining_steps == 8  # noqa: SLF001
    assert [r.pipeline_stage for r in loaded.get_pipeline_stage_assignment()] == [0, 1]
    # Outside the scope, stock Keras ignores the original's keys.
    stock = keras.Model.from_config(config)
    assert not isinstance(stock, KerasExtensions) and len(stock.layers) == 3
