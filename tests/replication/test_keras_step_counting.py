"""How Keras on R replicas counts steps (graphcore/keras keras/ipu/extensions/data_adapter.py).

The user's `steps`/`steps_per_epoch` and the data's length count batches over
all replicas; each replica runs `steps // R` steps, and the progress bar,
callbacks and History count those per-replica steps.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu


@pytest.fixture(autouse=True)
def _reset():
    yield
    ipu.config.reset_ipu_configuration()


def _configure(ipus: int):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    config.configure_ipu_system()
    return ipu.ipu_strategy.IPUStrategy()


def _model(batch_size=2):
    # The original's test model; its CPU reference takes any batch size.
    input_layer = keras.layers.Input(shape=(32,), dtype=np.single, batch_size=batch_size)
    init = keras.initializers.Constant(0.1)
    x = keras.layers.Dense(4, name="layer0", kernel_initializer=init)(input_layer)
    x = keras.layers.Dense(2, name="layer1", kernel_initializer=init)(x)
    return keras.Model(input_layer, x)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tensorflow"]


def test_predict_steps_count_batches_over_all_replicas(caplog):
    """model_replication_test.py testPredictWithNumpyDataBs2Replicas2Steps2Ga1."""
    strategy = _configure(2)
    rng = np.random.default_rng(0)
    input_x = rng.normal(size=(96, 32)).astype(np.single)
    with strategy.scope(), caplog.at_level(logging.WARNING, "tensorflow"):
        m = _model()
        m.compile(keras.optimizers.SGD(0.001), loss="mse", steps_per_execution=2)
        result = m.predict(input_x, batch_size=2, steps=2)
    # 2 steps in all: one step of batch 2 on each replica.
    assert isinstance(result, np.ndarray)
    assert result.shape == (4, 2)
    reference = _model(None)
    np.testing.assert_allclose(result, reference.predict(input_x[:4], verbose=0), rtol=1e-5)
    assert _warnings(caplog) == [
        "`steps_per_execution` has been set to 2 but the dataset provided to this replica "
        "only contains 1 batches. Using 1 as `steps_per_execution`."
    ]


@pytest.mark.parametrize(("samples", "steps_per_execution"), [(96, 24), (60, 3)])
def test_predict_returns_every_sample_in_order(samples, steps_per_execution):
    """model_replication_test.py testPredictWithNumpyDataBs2Replicas2(Ga3DropsSamples)."""
    strategy = _configure(2)
    input_x = np.random.default_rng(1).normal(size=(samples, 32)).astype(np.single)
    with strategy.scope():
        m = _model()
        m.compile("sgd", loss="mse", steps_per_execution=steps_per_execution)
        result = m.predict(input_x, batch_size=2)
    assert result.shape == (samples, 2)
    np.testing.assert_allclose(result, _model(None).predict(input_x, verbose=0), rtol=1e-5)


class _Steps(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.ends = []
        self.params_steps = None

    def on_train_begin(self, logs=None):
        self.params_steps = self.params["steps"]

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(batch)


def test_fit_counts_per_replica_steps_and_drops_the_remainder(caplog, capsys):
    """13 batches on 2 replicas: 6 steps each; the 13th batch is dropped with a warning."""
    strategy = _configure(2)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(26, 32)).astype(np.single)
    y = rng.normal(size=(26, 2)).astype(np.single)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2, drop_remainder=True)
    steps = _Steps()
    with strategy.scope(), caplog.at_level(logging.WARNING, "tensorflow"):
        m = _model()
        m.compile(keras.optimizers.SGD(0.01), loss="mse", steps_per_execution=3)
        history = m.fit(dataset, epochs=2, verbose=1, callbacks=[steps])
    assert "6/6" in capsys.readouterr().out
    assert steps.params_steps == 6
    assert steps.ends == [2, 5, 2, 5]  # one callback per execution of 3 steps
    assert len(history.history["loss"]) == 2
    assert _warnings(caplog) == [
        "Dataset of length 13 is being evenly distributed between 2 replicas. The remaining 1 "
        "batch will be dropped."
    ]
    # Each epoch: 6 steps of global batch 4 over the first 24 samples, the replicas'
    # gradients summed (as the original's IPUStrategy reduces): twice the learning rate.
    reference = _model(None)
    reference.compile(keras.optimizers.SGD(0.02), loss="mse")
    reference.fit(x[:24], y[:24], batch_size=4, epochs=2, shuffle=False, verbose=0)
    for ours, theirs in zip(m.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)


def test_steps_per_epoch_is_a_total_over_replicas(capsys):
    strategy = _configure(2)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 32)).astype(np.single)
    y = rng.normal(size=(64, 2)).astype(np.single)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2, drop_remainder=True).repeat()
    with strategy.scope():
        m = _model()
        m.compile(keras.optimizers.SGD(0.01), loss="mse", steps_per_execution=2)
        m.fit(dataset, steps_per_epoch=8, epochs=1, verbose=1)
    assert "4/4" in capsys.readouterr().out
    reference = _model(None)
    reference.compile(keras.optimizers.SGD(0.02), loss="mse")  # 2 replicas' gradients summed
    reference.fit(x[:16], y[:16], batch_size=4, epochs=1, shuffle=False, verbose=0)
    for ours, theirs in zip(m.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("method", ["fit", "evaluate", "predict"])
def test_steps_per_execution_must_divide_the_steps_of_a_replica(method):
    strategy = _configure(2)
    x = np.ones((24, 32), np.single)
    y = np.ones((24, 2), np.single)
    with strategy.scope():
        m = _model()
        m.compile("sgd", loss="mse", steps_per_execution=4)
        arguments = (x,) if method == "predict" else (x, y)
        with pytest.raises(
            ValueError,
            match=re.escape(
                "`steps_per_execution` (4) must be a divisor of the number of batches (6) in the "
                "dataset provided to this replica."
            ),
        ):
            getattr(m, method)(*arguments, batch_size=2, verbose=0)


def test_data_too_small_for_every_replica_is_an_error(caplog):
    """data_adapter_test.py test_dataset_not_big_enough_with_replication, through predict."""
    strategy = _configure(4)
    dataset = tf.data.Dataset.from_tensor_slices(np.ones((6, 32), np.single)).batch(
        2, drop_remainder=True
    )
    with strategy.scope(), caplog.at_level(logging.WARNING, "tensorflow"):
        # No static batch size: tf_keras' Input checks it against num_replicas_in_sync.
        m = _model(None)
        m.compile("sgd", loss="mse")
        with pytest.raises(
            ValueError,
            match=re.escape(
                "The provided dataset contains 3 items, but all 4 replicas are requested to run "
                "1 steps each. Make sure the dataset contains at least 4 items."
            ),
        ):
            m.predict(dataset)
    assert _warnings(caplog) == [
        "Dataset of length 3 is being evenly distributed between 4 replicas. The remaining 3 "
        "batches will be dropped.",
        "`steps_per_execution` has been set to 1 but the dataset provided to this replica only "
        "contains 0 batches. Using 0 as `steps_per_execution`.",
    ]


def test_fit_checks_its_validation_data_for_one_replica_first(caplog):
    """The original's `fit` builds its validation data handler with the constructor's
    default of one replica, so the rules run for one replica before `evaluate` runs
    them for the model's (keras/ipu/extensions/extensions_base.py `_fit_delegate`)."""
    strategy = _configure(2)
    x = np.ones((16, 32), np.single)
    y = np.ones((16, 2), np.single)
    with strategy.scope(), caplog.at_level(logging.WARNING, "tensorflow"):
        m = _model()
        m.compile("sgd", loss="mse", steps_per_execution=4)
        # 8 batches: 4 steps on each replica. Validation: 6 batches, 3 steps on each.
        with pytest.raises(
            ValueError,
            match=re.escape(
                "`steps_per_execution` (4) must be a divisor of the number of batches (6) in the "
                "dataset provided."
            ),
        ):
            m.fit(x, y, batch_size=2, validation_data=(x[:12], y[:12]), verbose=0)
        caplog.clear()
        history = m.fit(x, y, batch_size=2, validation_data=(x[:4], y[:4]), verbose=0)
    assert len(history.history["val_loss"]) == 1
    assert _warnings(caplog) == [
        "`steps_per_execution` has been set to 4 but the dataset provided only contains 2 "
        "batches. Using 2 as `steps_per_execution`.",
        "`steps_per_execution` has been set to 4 but the dataset provided to this replica only "
        "contains 1 batches. Using 1 as `steps_per_execution`.",
    ]
