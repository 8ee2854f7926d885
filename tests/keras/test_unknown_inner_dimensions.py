"""Keras models whose inputs have an unknown inner dimension (`[batch, None, 1]`), with
sample weights, in fit/evaluate/predict on the IPU, against stock tf_keras: the data of
one call have static shapes, as IPU programs need; another call may bring others."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
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


def _arrays(batches):
    """The batches as one set of arrays (x, y, sample_weight)."""
    return tuple(np.concatenate(part) for part in zip(*batches, strict=True))


def test_fit_on_sequences_of_another_length_in_each_call(strategy):
    reference = _compile(_sequence_model())
    with strategy.scope():
        model = _compile(_sequence_model(), steps_per_execution=2)
    # Each call's data have one length; the next call's another (a program per shape).
    for length, seed in ((3, 0), (5, 1)):
        x, y, weights = _arrays(_batches([length] * 4, seed=seed))
        expected = reference.fit(
            x, y, sample_weight=weights, batch_size=BATCH, epochs=2, shuffle=False, verbose=0
        )
        with strategy.scope():
            history = model.fit(
                x, y, sample_weight=weights, batch_size=BATCH, epochs=2, shuffle=False, verbose=0
            )
        np.testing.assert_allclose(history.history["loss"], expected.history["loss"], rtol=1e-5)
        np.testing.assert_allclose(history.history["mae"], expected.history["mae"], rtol=1e-5)
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_evaluate_and_predict_on_sequences_of_another_length_in_each_call(strategy):
    reference = _compile(_sequence_model())
    with strategy.scope():
        model = _compile(_sequence_model(), steps_per_execution=2)
    for length, seed in ((6, 1), (2, 2)):
        x, y, weights = _arrays(_batches([length] * 2, seed=seed))
        with strategy.scope():
            loss = model.evaluate(x, y, sample_weight=weights, batch_size=BATCH, verbose=0)
            predictions = model.predict(x, batch_size=BATCH, verbose=0)
        expected = reference.evaluate(x, y, sample_weight=weights, batch_size=BATCH, verbose=0)
        np.testing.assert_allclose(loss, expected, rtol=1e-5)
        np.testing.assert_allclose(
            predictions, reference.predict(x, batch_size=BATCH, verbose=0), rtol=1e-5, atol=1e-6
        )


def test_data_whose_length_varies_within_a_call_is_refused(strategy):
    """As the original's IPU data handler (keras/ipu/extensions/data_adapter.py): a
    generator's shapes are unknown ahead of time, and a dataset's must be fully defined."""
    batches = _batches([3, 5])

    def generate():
        yield from batches

    with strategy.scope():
        model = _compile(_sequence_model(), steps_per_execution=2)
        with pytest.raises(ValueError, match=r"of type `generator` which is not compatible"):
            model.fit(generate(), steps_per_epoch=2, verbose=0)
        spec = tf.TensorSpec([BATCH, None, 1], tf.float32)
        dataset = tf.data.Dataset.from_generator(
            generate, output_signature=(spec, spec, tf.TensorSpec([BATCH, None], tf.float32))
        )
        with pytest.raises(ValueError, match=r"shape \(4, None, 1\) which is not fully defined"):
            model.fit(dataset, steps_per_epoch=2, verbose=0)


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
