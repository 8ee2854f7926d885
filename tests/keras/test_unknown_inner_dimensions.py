"""Keras models whose inputs have an unknown inner dimension (`[batch, None, 1]`), with
sample weights, in fit/evaluate/predict on the IPU, against stock tf_keras."""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras
from tensorflow.python import ipu

BATCH = 4


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


def _sequence_model():
    keras.utils.set_random_seed(5)
    inputs = keras.Input((None, 1))
    hidden = keras.layers.Dense(4, activation="tanh")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    return model


def _compile(model, **kwargs):
    model.compile(keras.optimizers.SGD(0.1), "mse", weighted_metrics=["mae"], **kwargs)
    return model


def _batches(lengths, seed=0):
    """Batches (x, y, sample_weight) of `BATCH` sequences, each batch of its own length."""
    rng = np.random.default_rng(seed)
    return [
        (
            rng.normal(size=(BATCH, length, 1)).astype(np.float32),
            rng.normal(size=(BATCH, length, 1)).astype(np.float32),
            rng.uniform(size=(BATCH, length)).astype(np.float32),
        )
        for length in lengths
    ]


def _generator(batches, epochs):
    def generate():
        for _ in range(epochs):
            yield from batches

    return generate()


# Two executions of two steps per epoch; the sequences' length changes between them.
LENGTHS = [3, 3, 5, 5]


def test_fit_on_sequences_whose_length_varies_between_executions(strategy):
    batches = _batches(LENGTHS)
    reference = _compile(_sequence_model())
    expected = reference.fit(
        _generator(batches, 2), steps_per_epoch=len(batches), epochs=2, verbose=0
    )
    with strategy.scope():
        model = _compile(_sequence_model(), steps_per_execution=2)
        history = model.fit(
            _generator(batches, 2), steps_per_epoch=len(batches), epochs=2, verbose=0
        )
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"], rtol=1e-5)
    np.testing.assert_allclose(history.history["mae"], expected.history["mae"], rtol=1e-5)


def test_evaluate_and_predict_on_sequences_whose_length_varies(strategy):
    batches = _batches(LENGTHS, seed=1)
    reference = _compile(_sequence_model())
    expected_loss = reference.evaluate(_generator(batches, 1), steps=len(batches), verbose=0)
    with strategy.scope():
        model = _compile(_sequence_model(), steps_per_execution=2)
        loss = model.evaluate(_generator(batches, 1), steps=len(batches), verbose=0)
        # Predictions of one length: Keras concatenates the executions' outputs.
        same_length = [x for x, _, _ in _batches([6, 6], seed=2)]
        predictions = model.predict(np.concatenate(same_length), batch_size=BATCH, verbose=0)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
    np.testing.assert_allclose(
        predictions,
        reference.predict(np.concatenate(same_length), batch_size=BATCH, verbose=0),
        rtol=1e-5,
        atol=1e-6,
    )


def test_arrays_for_an_input_of_unknown_length_with_sample_weights(strategy):
    ((x, y, weights),) = _batches([7], seed=3)
    x, y, weights = (np.tile(a, (4,) + (1,) * (a.ndim - 1)) for a in (x, y, weights))
    reference = _compile(_sequence_model())
    expected = reference.fit(x, y, sample_weight=weights, batch_size=BATCH, verbose=0)
    with strategy.scope():
        model = _compile(_sequence_model(), steps_per_execution=2)
        model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=1)
        history = model.fit(x, y, sample_weight=weights, batch_size=BATCH, verbose=0)
        loss = model.evaluate(x, y, sample_weight=weights, batch_size=BATCH, verbose=0)
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"], rtol=1e-5)
    np.testing.assert_allclose(
        loss,
        reference.evaluate(x, y, sample_weight=weights, batch_size=BATCH, verbose=0),
        rtol=1e-5,
    )
