"""Keras fit/evaluate/predict on the IPU (later API) against stock tf_keras."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu

from openipu._src.keras.extensions.model_extensions import KerasExtensions


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


def _data(samples=96, features=8, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, features)).astype(np.float32)
    y = rng.integers(0, classes, size=(samples,)).astype(np.int32)
    return x, y


def _sequential():
    return keras.Sequential(
        [keras.layers.Dense(16, activation="relu", input_shape=(8,)), keras.layers.Dense(3)]
    )


def _functional():
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(3)(hidden))


class _Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(self.hidden(x))


def _compile(model, **kwargs):
    model.compile(
        keras.optimizers.SGD(0.05),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        **kwargs,
    )
    return model


def _reference(build, x, y, epochs=2, batch_size=8, **fit_kwargs):
    keras.utils.set_random_seed(3)
    model = _compile(build())
    if isinstance(model, _Subclassed):
        model(x[:1])
    history = model.fit(
        x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0, **fit_kwargs
    )
    return model, history


def _ipu_model(strategy, build, x, **compile_kwargs):
    with strategy.scope():
        keras.utils.set_random_seed(3)
        model = _compile(build(), **compile_kwargs)
        if isinstance(model, _Subclassed):
            model(x[:1])
    return model


@pytest.mark.parametrize(
    "build", [_sequential, _functional, _Subclassed], ids=["sequential", "functional", "subclassed"]
)
def test_fit_matches_stock_keras(strategy, build):
    x, y = _data()
    reference, reference_history = _reference(build, x, y)
    model = _ipu_model(strategy, build, x, steps_per_execution=4)
    assert isinstance(model, KerasExtensions)
    with strategy.scope():
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    # Keras reports the running mean of the epoch's losses; so do we.
    np.testing.assert_allclose(
        history.history["loss"], reference_history.history["loss"], rtol=1e-4
    )
    np.testing.assert_allclose(history.history["accuracy"], reference_history.history["accuracy"])


def test_evaluate_and_predict_match_stock_keras(strategy):
    x, y = _data()
    reference, _ = _reference(_sequential, x, y, epochs=1)
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=4)
    model.set_weights(reference.get_weights())
    with strategy.scope():
        ours = model.evaluate(x, y, batch_size=8, verbose=0)
        predictions = model.predict(x, batch_size=8, verbose=0)
    np.testing.assert_allclose(ours, reference.evaluate(x, y, batch_size=8, verbose=0), rtol=1e-5)
    np.testing.assert_allclose(
        predictions, reference.predict(x, batch_size=8, verbose=0), rtol=1e-5, atol=1e-6
    )


def test_fit_with_datasets_finite_and_repeated(strategy):
    x, y = _data()
    reference, _ = _reference(_sequential, x, y)
    finite = tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=4)
    with strategy.scope():
        model.fit(finite, epochs=2, verbose=0)
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)

    repeated = finite.repeat()
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=4)
    with strategy.scope():
        history = model.fit(repeated, epochs=2, steps_per_epoch=12, verbose=0)
    assert len(history.history["loss"]) == 2
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_fit_with_a_generator(strategy):
    """A generator's shapes are given by `tf.data.Dataset.from_generator`, as the original's
    error asks: the generator alone is refused (keras/ipu/extensions/data_adapter.py)."""
    x, y = _data()

    def batches():
        while True:
            for start in range(0, len(x), 8):
                yield x[start : start + 8], y[start : start + 8]

    reference, _ = _reference(_sequential, x, y, epochs=1)
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=4)
    signature = (
        tf.TensorSpec((8,) + x.shape[1:], tf.float32),
        tf.TensorSpec((8,) + y.shape[1:], tf.int32),
    )
    with strategy.scope():
        with pytest.raises(ValueError, match="Please use `tf.data.Dataset.from_generator"):
            model.fit(batches(), steps_per_epoch=12, epochs=1, verbose=0)
        dataset = tf.data.Dataset.from_generator(batches, output_signature=signature)
        model.fit(dataset, steps_per_epoch=12, epochs=1, verbose=0)
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_validation_data_and_frequency(strategy):
    x, y = _data()
    xv, yv = _data(32, seed=1)
    reference, reference_history = _reference(
        _sequential, x, y, epochs=4, validation_data=(xv, yv), validation_freq=2
    )
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=4)
    with strategy.scope():
        history = model.fit(
            x,
            y,
            batch_size=8,
            epochs=4,
            shuffle=False,
            verbose=0,
            validation_data=(xv, yv),
            validation_freq=2,
        )
    assert len(history.history["val_loss"]) == 2
    np.testing.assert_allclose(
        history.history["val_loss"], reference_history.history["val_loss"], rtol=1e-4
    )


@pytest.mark.parametrize("method", ["fit", "evaluate", "predict"])
def test_steps_per_execution_must_divide_the_steps(strategy, method):
    # keras/ipu/extensions/data_adapter.py `_validate_data_handler`: in all three methods.
    x, y = _data()
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=5)
    arguments = (x,) if method == "predict" else (x, y)
    with (
        strategy.scope(),
        pytest.raises(
            ValueError,
            match=re.escape(
                "`steps_per_execution` (5) must be a divisor of the number of batches (12) "
                "in the dataset provided."
            ),
        ),
    ):
        getattr(model, method)(*arguments, batch_size=8, verbose=0)


def test_steps_per_execution_beyond_the_data_is_cut_to_it(strategy, caplog):
    x, y = _data(32)
    reference, reference_history = _reference(_sequential, x, y)
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=16)
    with strategy.scope(), caplog.at_level(logging.WARNING, "tensorflow"):
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        predictions = model.predict(x, batch_size=8, verbose=0)
    warning = (
        "`steps_per_execution` has been set to 16 but the dataset provided only contains 4 "
        "batches. Using 4 as `steps_per_execution`."
    )
    assert [r.getMessage() for r in caplog.records].count(warning) == 2
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        history.history["loss"], reference_history.history["loss"], rtol=1e-4
    )
    np.testing.assert_allclose(
        predictions, reference.predict(x, batch_size=8, verbose=0), rtol=1e-5, atol=1e-6
    )
    # The compiled value is back once the run is over (`_truncate_execution_to_epoch`).
    assert int(model._steps_per_execution.numpy()) == 16


@pytest.mark.parametrize("method", ["fit", "evaluate", "predict"])
@pytest.mark.parametrize("samples", [100, 8], ids=["trailing", "smaller-than-a-batch"])
def test_a_partial_batch_is_an_error(strategy, method, samples):
    # keras/ipu/extensions/data_adapter.py `_get_and_post_process_dataset`.
    x, y = _data(samples)
    model = _ipu_model(strategy, _sequential, x)
    arguments = (x,) if method == "predict" else (x, y)
    batch_size = 8 if samples == 100 else None  # Keras' default is 32
    with (
        strategy.scope(),
        pytest.raises(
            ValueError,
            match=re.escape(
                "The provided set of data has a partial batch, which could result in data being "
                f"dropped. Either adjust the `batch_size` of your model (currently set to "
                f"{batch_size or 32}) or pad your dataset to ensure there are no partial batches."
            ),
        ),
    ):
        getattr(model, method)(*arguments, batch_size=batch_size, verbose=0)


_DATASET_ERRORS = {
    # keras/ipu/extensions/data_adapter.py `_validate_dataset`.
    "partial-shapes": (
        lambda d: d.unbatch().batch(8),
        {},
        "The provided set of data contains a shape (None, 8) which is not fully defined. "
        "Executing on IPU requires all dataset elements to have fully defined shapes. If "
        "using batch() make sure to set `drop_remainder=True`.",
    ),
    "not-enough-data": (
        lambda d: d,
        {"steps_per_epoch": 8, "epochs": 2},
        "Your input does not have enough data. Make sure that your dataset or generator "
        "can generate at least 16 batches (currently it can only generate 12 batches).",
    ),
    # `_infer_steps`.
    "unknown-size": (
        lambda d: d.filter(lambda *_: True),
        {},
        "Could not infer the size of the data. You must specify the number of steps to run.",
    ),
}


@pytest.mark.parametrize("case", list(_DATASET_ERRORS))
def test_dataset_errors(strategy, case):
    change, fit_kwargs, message = _DATASET_ERRORS[case]
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=2)
    with strategy.scope(), pytest.raises(ValueError, match=re.escape(message)):
        model.fit(change(dataset), verbose=0, **fit_kwargs)


class _Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batches = []
        self.evaluations = []

    def on_train_batch_end(self, batch, logs=None):
        self.batches.append(batch)

    def on_epoch_end(self, epoch, logs=None):
        x, y = _data(32, seed=5)
        self.evaluations.append(self.model.evaluate(x, y, batch_size=8, verbose=0))
        self.weights = self.model.get_weights()


def test_callbacks_see_whole_executions_and_can_evaluate(strategy, tmp_path):
    x, y = _data()
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=4)
    recorder = _Recorder()
    checkpoint = keras.callbacks.ModelCheckpoint(
        str(tmp_path / "weights.{epoch}.h5"), save_weights_only=True
    )
    board = keras.callbacks.TensorBoard(str(tmp_path / "logs"))
    with strategy.scope():
        model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[recorder, checkpoint, board])
    # One callback per execution of 4 steps, numbered by the last step in it (as stock Keras).
    assert recorder.batches == [3, 7, 11, 3, 7, 11]
    assert len(recorder.evaluations) == 2
    assert (tmp_path / "weights.2.h5").exists()
    for ours, saved in zip(model.get_weights(), recorder.weights, strict=True):
        np.testing.assert_array_equal(ours, saved)


def test_progress_bar_counts_steps(strategy, capsys):
    x, y = _data()
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=4)
    with strategy.scope():
        model.fit(x, y, batch_size=8, epochs=1, verbose=1)
    assert "12/12" in capsys.readouterr().out


def test_train_on_batch_runs_one_step(strategy):
    x, y = _data()
    reference = _compile(_sequential())
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=4)
    reference.set_weights(model.get_weights())
    with strategy.scope():
        ours = model.train_on_batch(x[:8], y[:8])
    np.testing.assert_allclose(ours, reference.train_on_batch(x[:8], y[:8]), rtol=1e-5)


def test_models_outside_the_scope_are_stock(strategy):
    assert not isinstance(_sequential(), KerasExtensions)
    disabled = ipu.ipu_strategy.IPUStrategy(enable_keras_extensions=False)
    with disabled.scope():
        assert not isinstance(_sequential(), KerasExtensions)


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_automatic_data_parallelism_runs_two_replicas(ipu_system):
    """A 2-IPU device runs 2 replicas of a 1-IPU model: global batch 2 x 8.

    As on the original, IPUStrategy is one replica to tf.distribute and the replicas'
    gradients are summed (ipu_strategy.py `_reduce_to`): one replica of batch 16
    matches with twice the learning rate.
    """
    x, y = _data()
    keras.utils.set_random_seed(3)
    reference = _sequential()
    reference.compile(
        keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    reference.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    strategy = ipu.ipu_strategy.IPUStrategy()
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=2)
    with strategy.scope():
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert strategy.num_replicas_in_sync == 1
    assert len(history.history["loss"]) == 2
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_evaluate_on_a_dataset_shorter_than_steps_per_execution_warns_and_runs(strategy, caplog):
    # keras/ipu/extensions/data_adapter.py `_validate_data_handler`: a warning, never an error.
    x, y = _data(24)
    reference, _ = _reference(_sequential, x, y, epochs=1)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)
    model = _ipu_model(strategy, _sequential, x, steps_per_execution=100)
    model.set_weights(reference.get_weights())
    with strategy.scope(), caplog.at_level(logging.WARNING, "tensorflow"):
        loss = model.evaluate(dataset, verbose=0)
    assert (
        "`steps_per_execution` has been set to 100 but the dataset provided only contains 3 "
        "batches. Using 3 as `steps_per_execution`." in [r.getMessage() for r in caplog.records]
    )
    np.testing.assert_allclose(loss, reference.evaluate(dataset, verbose=0), rtol=1e-5)


def test_int64_labels_must_be_cast_as_on_the_original(strategy):
    # The original's Keras feeds data through an IPUInfeedQueue, which carries no int64
    # (kernels/datastream/feeds.cc): its tutorials cast labels, `y.astype(np.int32)`.
    x, y = _data()
    with strategy.scope():
        model = _compile(_sequential())
        with pytest.raises(
            tf.errors.FailedPreconditionError,
            match="^Unsupported datatype int64 on index 1 of feed operation",
        ):
            model.fit(x, y.astype(np.int64), batch_size=8, verbose=0)
        keras.utils.set_random_seed(0)
        model = _compile(_sequential())
        history = model.fit(x, y, batch_size=8, verbose=0, shuffle=False)
    keras.utils.set_random_seed(0)
    reference = _compile(_sequential()).fit(x, y, batch_size=8, verbose=0, shuffle=False)
    np.testing.assert_allclose(history.history["loss"], reference.history["loss"], rtol=1e-5)


def test_float64_data_is_cast_to_float32_with_the_v2_dtype_behaviour(strategy):
    # keras/ipu/extensions/data_adapter.py `_autocast_dataset`: float64 features and
    # targets reach the IPU as float32; predictions equal stock Keras' on the same data.
    x, y = _data()
    targets = np.eye(3)[y]  # float64
    with strategy.scope():
        keras.utils.set_random_seed(1)
        model = _sequential()
        model.compile(keras.optimizers.SGD(0.05), "mse")
        model.fit(x.astype(np.float64), targets, batch_size=8, verbose=0, shuffle=False)
        predicted = model.predict(x.astype(np.float64), batch_size=8, verbose=0)
    keras.utils.set_random_seed(1)
    reference = _sequential()
    reference.compile(keras.optimizers.SGD(0.05), "mse")
    reference.fit(x, targets, batch_size=8, verbose=0, shuffle=False)
    assert predicted.dtype == np.float32
    np.testing.assert_allclose(predicted, reference.predict(x, batch_size=8, verbose=0), atol=1e-5)


def test_int64_predictions_must_be_cast_as_on_the_original(strategy):
    # The original's Keras returns predictions through an outfeed, which carries no int64
    # (kernels/datastream/feeds.cc): an argmax output is cast to int32 to leave the IPU.
    x, _ = _data()
    with strategy.scope():
        inputs = keras.Input((8,))
        logits = keras.layers.Dense(3)(inputs)
        model = keras.Model(inputs, tf.argmax(logits, axis=-1))
        with pytest.raises(
            tf.errors.FailedPreconditionError,
            match="^Unsupported datatype int64 on index 0 of feed operation",
        ):
            model.predict(x, batch_size=8, verbose=0)
        cast = keras.Model(inputs, tf.cast(tf.argmax(logits, axis=-1), tf.int32))
        predicted = cast.predict(x, batch_size=8, verbose=0)
    expected = np.argmax(keras.Model(inputs, logits).predict(x, batch_size=8, verbose=0), -1)
    np.testing.assert_array_equal(predicted, expected)
