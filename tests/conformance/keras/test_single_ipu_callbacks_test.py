"""Conformance: graphcore/keras `keras/ipu/extensions/single_ipu/callbacks_test.py`.

Stock Keras callbacks with models inside an IPUStrategy: every hook is called as often
as in stock Keras for fit, evaluate and predict, early stopping (modes, reuse, baseline,
restoring the best weights), learning-rate scheduling and reduction on plateau (the
optimizer's rate read back), checkpoints (the saved weights are the model's), the CSV
log (the history's values), stopping on NaN, a lambda callback, float logs and stopping
within an epoch; callbacks that read their logs only when they must (checkpoints, the
verbose-2 progress bar), logs changed by callbacks of either kind seen by all, the
deprecated `epsilon` of ReduceLROnPlateau, no warnings from the default callbacks, a
subclassed model checkpointed as a SavedModel, and TensorBoard's event files (the runs and
summary tags written, the projector's config, the model summary), RemoteMonitor's posts
(requests.post mocked) and checkpoints with TF_CONFIG set. Where tf_keras 2.21 (the
Keras here) behaves unlike the original's Keras, the scenario is an expected failure
naming the difference. TensorBoard's profiler traces are counted as TensorFlow 2.21
writes them (see `_trace_files`).
"""

from __future__ import annotations

import collections
import csv
import json
import pathlib
import re
import threading
import time

import numpy as np
import pytest
import requests
import tensorflow as tf
import tf_keras as keras
from single_ipu_checks import MODEL_TYPES, assert_close, model_from_layers, stock

pytestmark = pytest.mark.usefixtures("ipu_scope")

TRAIN_SAMPLES = 10
TEST_SAMPLES = 10
NUM_CLASSES = 2
INPUT_DIM = 3
NUM_HIDDEN = 5
BATCH_SIZE = 5

CALLBACK_HOOKS = [
    "on_batch_begin", "on_batch_end", "on_epoch_begin", "on_epoch_end",
    "on_predict_batch_begin", "on_predict_batch_end", "on_predict_begin", "on_predict_end",
    "on_test_batch_begin", "on_test_batch_end", "on_test_begin", "on_test_end",
    "on_train_batch_begin", "on_train_batch_end", "on_train_begin", "on_train_end",
]  # fmt: skip


class Counter(keras.callbacks.Callback):
    """Counts the calls of each hook."""

    def __init__(self):
        super().__init__()
        self.method_counts = collections.defaultdict(int)
        for name in CALLBACK_HOOKS:
            setattr(self, name, self._counting(name, getattr(self, name)))

    def _counting(self, name, method):
        def call_and_count(*args, **kwargs):
            self.method_counts[name] += 1
            return method(*args, **kwargs)

        return call_and_count


def _check_counts(counter, expected):
    assert {name: counter.method_counts[name] for name in expected} == expected


def _counted_model(model_type):
    layers = [
        keras.layers.Dense(10, activation="relu"),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
    model = model_from_layers(layers, (10,), model_type)
    model.compile(tf.compat.v1.train.AdamOptimizer(0.001), "binary_crossentropy")
    return model


@pytest.mark.follows("test_callback_hooks_are_called_in_fit")
@pytest.mark.slow
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_callback_hooks_are_called_in_fit(model_type):
    counter = Counter()
    _counted_model(model_type).fit(
        np.ones((10, 10)),
        np.ones((10, 1)),
        validation_data=(np.ones((4, 10)), np.ones((4, 1))),
        batch_size=2,
        steps_per_epoch=5,
        epochs=5,
        callbacks=[counter],
        verbose=0,
    )
    _check_counts(
        counter,
        {
            "on_batch_begin": 25, "on_batch_end": 25, "on_epoch_begin": 5, "on_epoch_end": 5,
            "on_predict_batch_begin": 0, "on_predict_batch_end": 0, "on_predict_begin": 0,
            "on_predict_end": 0, "on_test_batch_begin": 10, "on_test_batch_end": 10,
            "on_test_begin": 5, "on_test_end": 5, "on_train_batch_begin": 25,
            "on_train_batch_end": 25, "on_train_begin": 1, "on_train_end": 1,
        },
    )  # fmt: skip


@pytest.mark.follows("test_callback_hooks_are_called_in_evaluate")
@pytest.mark.parametrize("model_type", ["functional"])  # one kind of model (the original: all)
def test_callback_hooks_are_called_in_evaluate(model_type):
    counter = Counter()
    _counted_model(model_type).evaluate(
        np.ones((10, 10)), np.ones((10, 1)), batch_size=2, callbacks=[counter], verbose=0
    )
    _check_counts(
        counter,
        {"on_test_batch_begin": 5, "on_test_batch_end": 5, "on_test_begin": 1, "on_test_end": 1},
    )


@pytest.mark.follows("test_callback_hooks_are_called_in_predict")
@pytest.mark.parametrize("model_type", ["subclass"])  # one kind of model (the original: all)
def test_callback_hooks_are_called_in_predict(model_type):
    counter = Counter()
    _counted_model(model_type).predict(
        np.ones((10, 10)), batch_size=2, callbacks=[counter], verbose=0
    )
    _check_counts(
        counter,
        {
            "on_predict_batch_begin": 5, "on_predict_batch_end": 5, "on_predict_begin": 1,
            "on_predict_end": 1,
        },
    )  # fmt: skip


@pytest.mark.follows("test_callback_list_methods")
def test_callback_list_methods():
    counter = Counter()
    callback_list = keras.callbacks.CallbackList([counter])
    for hook in ("on_test_batch_begin", "on_test_batch_end", "on_predict_batch_begin",
                 "on_predict_batch_end"):  # fmt: skip
        getattr(callback_list, hook)(0)
    _check_counts(
        counter,
        {
            "on_test_batch_begin": 1, "on_test_batch_end": 1, "on_predict_batch_begin": 1,
            "on_predict_batch_end": 1,
        },
    )  # fmt: skip


def _test_data(train_samples=TRAIN_SAMPLES, test_samples=TEST_SAMPLES, input_dim=INPUT_DIM):
    """Keras's `testing_utils.get_test_data`: classes around per-class centres."""
    rng = np.random.default_rng(1337)
    total = train_samples + test_samples
    y = rng.integers(0, NUM_CLASSES, size=(total,))
    centres = rng.random((NUM_CLASSES, input_dim))
    x = (centres[y] + rng.normal(0, 0.1, (total, input_dim))).astype(np.float32)
    return (x[:train_samples], y[:train_samples]), (x[train_samples:], y[train_samples:])


def _small_mlp(num_hidden=NUM_HIDDEN, num_classes=NUM_CLASSES, input_dim=INPUT_DIM):
    return keras.Sequential(
        [
            keras.layers.Dense(num_hidden, activation="relu", input_dim=input_dim),
            keras.layers.Dense(num_classes, activation="softmax" if num_classes > 1 else "sigmoid"),
        ]
    )


def _categorical_data():
    (x_train, y_train), (x_test, y_test) = _test_data()
    to_categorical = keras.utils.to_categorical
    return (x_train, to_categorical(y_train)), (x_test, to_categorical(y_test))


@pytest.mark.follows("test_EarlyStopping")
@pytest.mark.parametrize(
    ("mode", "monitor"),
    [
        ("max", "val_acc"), ("min", "val_loss"), ("auto", "val_acc"), ("auto", "loss"),
        ("unknown", "unknown"),
    ],
)  # fmt: skip
def test_early_stopping(mode, monitor):
    (x_train, y_train), (x_test, y_test) = _categorical_data()
    model = _small_mlp()
    model.compile(loss="categorical_crossentropy", optimizer="rmsprop", metrics=["acc"])
    stopper = keras.callbacks.EarlyStopping(patience=0, monitor=monitor, mode=mode)
    history = model.fit(
        x_train,
        y_train,
        batch_size=BATCH_SIZE,
        validation_data=(x_test, y_test),
        callbacks=[stopper],
        epochs=5,
        verbose=0,
    )
    if monitor == "unknown":  # a quantity not logged: a warning, and no stopping
        assert len(history.epoch) == 5
        return
    values = history.history[monitor]
    # With no patience it stops at the first epoch that does not improve (or runs all 5).
    better = (lambda a, b: a > b) if "acc" in monitor else (lambda a, b: a < b)
    improving = [better(values[i + 1], values[i]) for i in range(len(values) - 1)]
    assert all(improving[:-1])
    assert len(values) == 5 or not improving[-1]


@pytest.mark.follows("test_EarlyStopping_reuse")
def test_early_stopping_reuse():
    rng = np.random.default_rng(1337)
    data = rng.random((100, 1)).astype(np.float32)
    labels = np.where(data > 0.5, 1, 0).astype(np.int32)
    model = keras.Sequential(
        [
            keras.layers.Dense(1, input_dim=1, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer="sgd", loss="binary_crossentropy", metrics=["accuracy"])
    stopper = keras.callbacks.EarlyStopping(monitor="accuracy", patience=3)
    for _ in range(2):  # the same callback a second time
        history = model.fit(data, labels, callbacks=[stopper], batch_size=10, verbose=0, epochs=20)
        assert len(history.epoch) >= 3


@pytest.mark.follows("test_EarlyStopping_with_baseline")
def test_early_stopping_with_baseline():
    (data, labels), _ = _test_data(train_samples=100, test_samples=50, input_dim=1)
    labels = labels.astype(np.int32)  # as the original: IPU infeeds carry no int64
    keras.utils.set_random_seed(1337)
    initial = _small_mlp(num_hidden=1, num_classes=1, input_dim=1).get_weights()

    def epochs_run():
        model = _small_mlp(num_hidden=1, num_classes=1, input_dim=1)
        model.set_weights(initial)
        model.compile(optimizer="sgd", loss="binary_crossentropy", metrics=["acc"])
        runs = []
        for patience in (0, 3):  # a baseline never reached
            stopper = keras.callbacks.EarlyStopping(monitor="acc", patience=patience, baseline=1.01)
            history = model.fit(
                data, labels, callbacks=[stopper], batch_size=10, shuffle=False, verbose=0,
                epochs=20,
            )  # fmt: skip
            runs.append(len(history.epoch))
        return runs

    ours = epochs_run()
    assert ours == stock(epochs_run)
    assert ours[1] >= 3


@pytest.mark.follows("test_EarlyStopping_final_weights_when_restoring_model_weights")
def test_early_stopping_final_weights_when_restoring_model_weights():
    x = np.ones((4, 1), np.float32)
    model = keras.Sequential([keras.layers.Dense(1, input_dim=1, kernel_initializer="ones")])
    model.compile("sgd", "mse")
    losses = [0.2, 0.15, 0.1, 0.11, 0.12]
    saved = {}

    class FakeValidation(keras.callbacks.Callback):
        """Sets the epoch's validation loss, and remembers the weights it ended with."""

        def on_epoch_end(self, epoch, logs=None):
            logs["val_loss"] = losses[epoch]
            saved[epoch] = [w.copy() for w in self.model.get_weights()]

    stopper = keras.callbacks.EarlyStopping(
        monitor="val_loss", patience=2, restore_best_weights=True
    )
    history = model.fit(
        x, x * 3, epochs=5, batch_size=4, callbacks=[FakeValidation(), stopper], verbose=0
    )
    assert len(history.epoch) == 5  # the loss stops improving at the last two epochs
    for ours, best in zip(model.get_weights(), saved[2], strict=True):
        assert_close(ours, best)  # epoch 2 had the best loss


def _fit_with(model, callbacks, epochs):
    (x_train, y_train), (x_test, y_test) = _categorical_data()
    return model.fit(
        x_train,
        y_train,
        batch_size=BATCH_SIZE,
        validation_data=(x_test, y_test),
        callbacks=callbacks,
        epochs=epochs,
        shuffle=False,
        verbose=0,
    )


def _learning_rate(model):
    return float(keras.backend.get_value(model.optimizer.lr))


@pytest.mark.follows("test_LearningRateScheduler")
def test_learning_rate_scheduler():
    model = _small_mlp()
    model.compile(loss="categorical_crossentropy", optimizer="sgd", metrics=["accuracy"])
    _fit_with(model, [keras.callbacks.LearningRateScheduler(lambda x: 1.0 / (1.0 + x))], 5)
    assert_close(_learning_rate(model), 0.2)
    model.compile(loss="categorical_crossentropy", optimizer="sgd", metrics=["accuracy"])
    _fit_with(model, [keras.callbacks.LearningRateScheduler(lambda x, lr: lr / 2)], 2)
    assert_close(_learning_rate(model), 0.01 / 4)
    model.compile(loss="categorical_crossentropy", optimizer="sgd", metrics=["accuracy"])
    schedule = keras.optimizers.schedules.CosineDecay(0.01, 2)
    _fit_with(model, [keras.callbacks.LearningRateScheduler(lambda epoch, _: schedule(epoch))], 2)
    assert_close(_learning_rate(model), 0.01 * 0.5 * (1 + np.cos(np.pi * (1 / 2))))


@pytest.mark.follows("test_ReduceLROnPlateau")
@pytest.mark.parametrize("min_delta", [0, 10])
def test_reduce_lr_on_plateau(min_delta):
    keras.utils.set_random_seed(1234)
    initial = _small_mlp().get_weights()

    def learning_rate_after_fit():
        model = _small_mlp()
        model.set_weights(initial)
        model.compile(loss="categorical_crossentropy", optimizer=keras.optimizers.SGD(0.1))
        reduce = keras.callbacks.ReduceLROnPlateau(
            monitor="val_loss", factor=0.1, min_delta=min_delta, patience=1, cooldown=5
        )
        _fit_with(model, [reduce], 2)
        return _learning_rate(model)

    ours = learning_rate_after_fit()
    assert_close(ours, stock(learning_rate_after_fit), atol=1e-6)
    if min_delta == 10:  # no epoch improves enough: the rate falls after the second
        assert_close(ours, 0.01, atol=1e-4)


@pytest.mark.follows("test_CSVLogger")
def test_csv_logger(tmp_path):
    path = tmp_path / "log.tsv"
    model = _small_mlp()
    model.compile(loss="categorical_crossentropy", optimizer="sgd", metrics=["accuracy"])
    history = _fit_with(model, [keras.callbacks.CSVLogger(str(path), separator="\t")], 2)
    with open(path) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        assert_close([float(r[key]) for r in rows], history.history[key], rtol=1e-6)
    # Appending continues the file.
    _fit_with(model, [keras.callbacks.CSVLogger(str(path), separator="\t", append=True)], 1)
    with open(path) as f:
        assert len(list(csv.DictReader(f, delimiter="\t"))) == 3


@pytest.mark.follows("test_TerminateOnNaN")
def test_terminate_on_nan():
    (x_train, y_train), (x_test, y_test) = _categorical_data()
    model = keras.Sequential()
    initializer = keras.initializers.Constant(value=1e5)
    for _ in range(5):
        model.add(
            keras.layers.Dense(
                2, input_dim=INPUT_DIM, activation="relu", kernel_initializer=initializer
            )
        )
    model.add(keras.layers.Dense(NUM_CLASSES))
    model.compile(loss="mean_squared_error", optimizer="rmsprop")
    history = model.fit(
        x_train,
        y_train,
        batch_size=BATCH_SIZE,
        validation_data=(x_test, y_test),
        callbacks=[keras.callbacks.TerminateOnNaN()],
        epochs=20,
        verbose=0,
    )
    loss = history.history["loss"]
    assert len(loss) == 1
    assert np.isnan(loss[0]) or np.isinf(loss[0])


@pytest.mark.follows("test_LambdaCallback")
def test_lambda_callback():
    model = _small_mlp()
    model.compile(loss="categorical_crossentropy", optimizer="sgd", metrics=["accuracy"])
    done = threading.Event()
    worker = threading.Thread(target=done.wait)
    worker.start()
    _fit_with(model, [keras.callbacks.LambdaCallback(on_train_end=lambda logs: done.set())], 5)
    worker.join(timeout=10)
    assert not worker.is_alive()


@pytest.mark.follows("test_ModelCheckpoint")
@pytest.mark.parametrize("save_weights_only", [True, False])
def test_model_checkpoint(tmp_path, save_weights_only):
    model = _small_mlp()
    model.compile(loss="categorical_crossentropy", optimizer="rmsprop", metrics=["acc"])
    path = str(tmp_path / "checkpoint.h5")
    checkpoint = keras.callbacks.ModelCheckpoint(
        path, monitor="val_loss", save_best_only=False, save_weights_only=save_weights_only
    )
    _fit_with(model, [checkpoint], 1)
    restored = _small_mlp()
    if save_weights_only:
        restored.load_weights(path)
    else:
        restored = keras.models.load_model(path)
    for ours, saved in zip(model.get_weights(), restored.get_weights(), strict=True):
        assert_close(saved, ours)


@pytest.mark.follows("test_callback_passed_floats")
def test_callback_passed_floats():
    seen = []

    class MyCallback(keras.callbacks.Callback):
        def on_batch_end(self, batch, logs=None):
            seen.append(("batch", type(batch), type(logs["loss"])))

        def on_epoch_end(self, epoch, logs=None):
            seen.append(("epoch", type(epoch), type(logs["loss"])))

    x, y = np.ones((10, 1), np.int32), np.ones((10, 1), np.int32)
    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(x, y, epochs=2, batch_size=10, callbacks=[MyCallback()], verbose=0)
    assert {kind for kind, _, _ in seen} == {"batch", "epoch"}
    assert all(index is int and loss is float for _, index, loss in seen)


@pytest.mark.follows("test_stop_training_batch_level")
def test_stop_training_batch_level():
    class MyCallback(keras.callbacks.Callback):
        batch_counter = 0

        def on_train_batch_end(self, batch, logs=None):
            self.batch_counter += 1
            if batch == 2:
                self.model.stop_training = True

    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    callback = MyCallback()
    model.fit(np.ones((10, 10)), np.ones((10, 1)), batch_size=2, callbacks=[callback], verbose=0)
    assert callback.batch_counter == 3  # 5 batches if stop_training did not work


def _progbar_model(input_shape=None, additional_metrics=()):
    layers = [
        keras.layers.Dense(3, activation="relu"),
        keras.layers.Dense(2, activation="softmax"),
    ]
    if input_shape is None:
        model = keras.Sequential(layers)
    else:
        model = model_from_layers(layers, input_shape, "functional")
    model.compile(
        loss="mse",
        optimizer="rmsprop",
        metrics=[keras.metrics.CategoricalAccuracy(name="my_acc"), *additional_metrics],
    )
    return model


def _ones_dataset(samples):
    x, y = tf.ones((samples, 3)), tf.zeros((samples, 2))
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(10, drop_remainder=True)


@pytest.mark.follows("test_progbar_logging")
def test_progbar_logging(capsys):
    _progbar_model((3,)).fit(_ones_dataset(200), epochs=2, steps_per_epoch=10)
    assert re.search(r"(.*- loss:.*- my_acc:.*)+", capsys.readouterr().out)


@pytest.mark.follows("test_progbar_logging_with_stateful_metrics")
def test_progbar_logging_with_stateful_metrics(capsys):
    class AddAllOnes(keras.metrics.Metric):
        def __init__(self, name="add_all_ones", **kwargs):
            super().__init__(name=name, **kwargs)
            self.total = self.add_weight(name="total", initializer="zeros")

        def update_state(self, y_true, y_pred, sample_weight=None):
            self.total.assign_add(tf.cast(tf.reduce_sum(y_true), dtype=tf.float32))

        def result(self):
            return self.total

    x_train = np.array([[0, 1, 0, 1, 0, 1, 0, 1]] * 8).astype(float)
    y_train = np.array([[1, 0], [0, 0], [1, 1], [1, 0], [0, 1], [1, 0], [1, 0], [0, 0]]).astype(
        np.int32
    )
    expected = r"(.*- loss:.*- my_acc:.*- add_all_ones: 7.0000)+"  # 7 ones in the 2 batches
    model = _progbar_model((8,), [AddAllOnes()])
    model.fit(x_train, y_train, verbose=1, batch_size=4, shuffle=False)
    assert re.search(expected, capsys.readouterr().out)
    model = _progbar_model((8,), [AddAllOnes()])
    model.evaluate(x_train, y_train, verbose=1, batch_size=4)
    assert re.search(expected, capsys.readouterr().out)


@pytest.mark.follows("test_progbar_logging_deferred_model_build")
def test_progbar_logging_deferred_model_build(capsys):
    model = _progbar_model()
    assert not model.built
    model.fit(_ones_dataset(200), epochs=2, steps_per_epoch=10)
    assert re.search(r"(.*- loss:.*- my_acc:.*)+", capsys.readouterr().out)


@pytest.mark.follows("test_progbar_logging_validation_data")
def test_progbar_logging_validation_data(capsys):
    _progbar_model((3,)).fit(_ones_dataset(50), epochs=2, validation_data=_ones_dataset(50))
    expected = r"(.*5/5.*- loss:.*- my_acc:.*- val_loss:.*- val_my_acc:.*)+"
    assert re.search(expected, capsys.readouterr().out)


@pytest.mark.follows("test_progbar_logging_validation_split")
def test_progbar_logging_validation_split(capsys):
    _progbar_model((3,)).fit(
        np.ones((100, 3)), np.zeros((100, 2)), batch_size=10, epochs=2, validation_split=0.2
    )
    expected = (
        r"(?s).*1/2.*8/8.*- loss:.*- my_acc:.*- val_loss:.*- val_my_acc:"
        r".*2/2.*8/8.*- loss:.*- my_acc:.*- val_loss:.*- val_my_acc:.*"
    )
    assert re.search(expected, capsys.readouterr().out)


@pytest.mark.follows("test_ReduceLROnPlateau_patience")
def test_reduce_lr_on_plateau_patience():
    class DummyOptimizer:
        def __init__(self):
            self.lr = keras.backend.variable(1.0)

    class DummyModel:
        def __init__(self):
            self.optimizer = DummyOptimizer()

    reduce = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", patience=2)
    reduce.model = DummyModel()
    rates = []
    for epoch, loss in enumerate([0.0860, 0.1096, 0.1040]):
        reduce.on_epoch_end(epoch, logs={"val_loss": loss})
        rates.append(keras.backend.get_value(reduce.model.optimizer.lr))
    assert rates[:-1] == [1.0, 1.0]
    assert rates[-1] < 1.0


@pytest.mark.follows("test_default_callbacks_do_not_call_batch_hooks")
def test_default_callbacks_do_not_call_batch_hooks(tmp_path):
    model = keras.Sequential([keras.layers.Dense(1)])
    callbacks = keras.callbacks.CallbackList(
        [
            keras.callbacks.TensorBoard(str(tmp_path), profile_batch=0),
            keras.callbacks.ModelCheckpoint(str(tmp_path)),
        ],
        add_progbar=True,
        model=model,
        verbose=2,
        epochs=3,
    )
    assert len(callbacks.callbacks) == 3
    assert not callbacks._should_call_train_batch_hooks
    assert not callbacks._should_call_test_batch_hooks
    assert not callbacks._should_call_predict_batch_hooks


def _checkpointed_model():
    model = _small_mlp()
    model.compile(loss="categorical_crossentropy", optimizer="rmsprop", metrics=["acc"])
    (x, y), _ = _categorical_data()
    return model, tf.data.Dataset.from_tensor_slices((x, y)).batch(5, drop_remainder=True)


@pytest.mark.follows("test_fit_with_ModelCheckpoint_with_dir_as_h5_filepath")
def test_fit_with_model_checkpoint_with_dir_as_h5_filepath(tmp_path):
    model, train = _checkpointed_model()
    filepath = tmp_path / "temp.h5"
    filepath.mkdir()
    callback = keras.callbacks.ModelCheckpoint(filepath=str(filepath))
    with pytest.raises(
        IOError, match="Please specify a non-directory filepath for ModelCheckpoint."
    ):
        model.fit(train, epochs=1, callbacks=[callback], verbose=0)


@pytest.mark.follows("test_ModelCheckpoint_with_bad_path_placeholders")
def test_model_checkpoint_with_bad_path_placeholders(tmp_path):
    model, train = _checkpointed_model()
    callback = keras.callbacks.ModelCheckpoint(str(tmp_path / "chkpt_{epoch:02d}_{mape:.2f}.h5"))
    with pytest.raises(KeyError, match="Failed to format this callback filepath"):
        model.fit(train, epochs=1, callbacks=[callback], verbose=0)


@pytest.mark.follows("test_ModelCheckpoint_override_if_file_exist")
def test_model_checkpoint_override_if_file_exist(tmp_path):
    model, train = _checkpointed_model()
    filepath = str(tmp_path / "checkpoint.epoch{epoch:02d}.h5")
    callback = keras.callbacks.ModelCheckpoint(filepath, save_weights_only=True)
    model.fit(train, epochs=1, callbacks=[callback], verbose=0)
    saved = str(tmp_path / "checkpoint.epoch01.h5")
    model.load_weights(saved)
    before = model.get_weights()
    model.fit(train, epochs=1, callbacks=[callback], verbose=0)  # writes epoch01 again
    model.load_weights(saved)
    after = model.get_weights()
    assert not all(np.allclose(b, a) for b, a in zip(before, after, strict=True))


@pytest.mark.follows("test_TensorBoard_basic")
def test_tensorboard_basic(tmp_path):
    model = _small_mlp(input_dim=INPUT_DIM)
    model.compile(loss="mse", optimizer="rmsprop")
    x, y = np.ones((10, INPUT_DIM)), np.ones((10, NUM_CLASSES))
    logdir = tmp_path / "logs"
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=2,
        validation_data=(x, y),
        callbacks=[keras.callbacks.TensorBoard(str(logdir))],
        verbose=0,
    )
    tags = {}
    for run in ("train", "validation"):
        for path in (logdir / run).glob("events.out.tfevents.*"):
            for event in tf.compat.v1.train.summary_iterator(str(path)):
                for value in event.summary.value:
                    tags.setdefault(run, set()).add(value.tag)
    assert "epoch_loss" in tags["train"]
    assert {"epoch_loss", "evaluation_loss_vs_iterations"} <= tags["validation"]


class _BatchEndCounter(keras.callbacks.Callback):
    def __init__(self, should_run=None):
        super().__init__()
        self.should_run = should_run
        self.batches = {"train": 0, "test": 0, "predict": 0}

    def on_train_batch_end(self, batch, logs=None):
        self.batches["train"] += 1

    def on_test_batch_end(self, batch, logs=None):
        self.batches["test"] += 1

    def on_predict_batch_end(self, batch, logs=None):
        self.batches["predict"] += 1


class _OverridingBatchEndCounter(_BatchEndCounter):
    """Tells Keras whether it implements batch hooks, whatever it defines."""

    def _implements_train_batch_hooks(self):
        return self.should_run

    def _implements_test_batch_hooks(self):
        return self.should_run

    def _implements_predict_batch_hooks(self):
        return self.should_run


def _run_all_three(callback):
    x, y = np.ones((10, 1)), np.ones((10, 1))
    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(x, y, epochs=2, batch_size=10, callbacks=[callback], verbose=0)
    model.evaluate(x, y, batch_size=10, callbacks=[callback], verbose=0)
    model.predict(x, batch_size=10, callbacks=[callback], verbose=0)
    return callback.batches


@pytest.mark.follows("test_implements_batch_hooks")
def test_implements_batch_hooks():
    assert _run_all_three(_BatchEndCounter()) == {"train": 2, "test": 1, "predict": 1}


@pytest.mark.follows("test_implements_batch_hooks_override")
@pytest.mark.parametrize("should_run", [True, False])
def test_implements_batch_hooks_override(should_run):
    expected = (
        {"train": 2, "test": 1, "predict": 1}
        if should_run
        else dict.fromkeys(("train", "test", "predict"), 0)
    )
    assert _run_all_three(_OverridingBatchEndCounter(should_run)) == expected


def _tensor_refusing_numpy():
    """A tensor whose conversion to NumPy (a blocking read) raises."""
    tensor = tf.convert_to_tensor(1.0)

    def refuse():
        raise RuntimeError("a blocking NumPy conversion was made")

    tensor.numpy = refuse
    return tensor


def _run_hooks(cb_list, logs, train_epoch_end=True):
    cb_list.on_train_begin(logs)
    cb_list.on_epoch_begin(0, logs)
    cb_list.on_train_batch_begin(0, logs)
    cb_list.on_train_batch_end(0, logs)
    if train_epoch_end:
        cb_list.on_epoch_end(0, logs)
        cb_list.on_train_end(logs)
    cb_list.on_test_begin(logs)
    cb_list.on_test_batch_begin(0, logs)
    cb_list.on_test_batch_end(0, logs)
    cb_list.on_test_end(logs)


@pytest.mark.follows("test_ModelCheckpoint_nonblocking")
def test_model_checkpoint_nonblocking(tmp_path):
    # The checkpoint reads the logs only when it saves (not within these 10 steps).
    callback = keras.callbacks.ModelCheckpoint(filepath=str(tmp_path), save_freq=100)
    assert callback._supports_tf_logs  # noqa: SLF001 - what the original checks
    model = keras.Sequential([keras.layers.Dense(1)])
    cb_list = keras.callbacks.CallbackList([callback], model=model, epochs=1, steps=10, verbose=0)
    logs = {"metric": _tensor_refusing_numpy()}
    _run_hooks(cb_list, logs)
    cb_list.on_predict_begin(logs)
    cb_list.on_predict_batch_begin(logs)
    cb_list.on_predict_batch_end(logs)
    cb_list.on_predict_end(logs)
    assert not list(tmp_path.iterdir())  # nothing saved


@pytest.mark.follows("test_ProgbarLogger_verbose_2_nonblocking")
def test_progbar_logger_verbose_2_nonblocking():
    callback = keras.callbacks.ProgbarLogger(count_mode="steps")
    assert callback._supports_tf_logs  # noqa: SLF001 - what the original checks
    model = keras.Sequential([keras.layers.Dense(1)])
    cb_list = keras.callbacks.CallbackList([callback], model=model, epochs=1, steps=10, verbose=2)
    logs = {"metric": _tensor_refusing_numpy()}
    _run_hooks(cb_list, logs, train_epoch_end=False)
    with pytest.raises(RuntimeError, match="NumPy conversion"):
        cb_list.on_epoch_end(0, logs)  # the epoch's end still reads the logs
    cb_list.on_train_end(logs)


@pytest.mark.follows("test_ReduceLROnPlateau_backwards_compatibility")
def test_reduce_lr_on_plateau_backwards_compatibility():
    from tf_keras.src import callbacks as keras_callbacks

    with tf.compat.v1.test.mock.patch.object(keras_callbacks.logging, "warning") as log:
        reduce_on_plateau = keras.callbacks.ReduceLROnPlateau(epsilon=1e-13)
    assert re.search("`epsilon` argument is deprecated", str(log.call_args))
    assert not hasattr(reduce_on_plateau, "epsilon")
    assert reduce_on_plateau.min_delta == 1e-13


class _CallAllHooks(keras.callbacks.Callback):
    """Runs `_run` from every hook."""

    def __init__(self):
        super().__init__()
        for name in CALLBACK_HOOKS:
            setattr(self, name, self._run)

    def _run(self, *args, logs=None):
        raise NotImplementedError


@pytest.mark.follows("test_logs_conversion")
def test_logs_conversion():
    class MutateNumpyLogs(_CallAllHooks):
        def _run(self, *args, logs=None):
            (logs or args[-1])["numpy"] = 1

    class MutateTensorFlowLogs(_CallAllHooks):
        def __init__(self):
            super().__init__()
            self._supports_tf_logs = True

        def _run(self, *args, logs=None):
            (logs or args[-1])["tf"] = 2

    seen = []

    class AssertNumpyLogs(_CallAllHooks):
        def _run(self, *args, logs=None):
            seen.append(dict(logs or args[-1]))

    class AssertTensorFlowLogs(AssertNumpyLogs):
        def __init__(self):
            super().__init__()
            self._supports_tf_logs = True

    cb_list = keras.callbacks.CallbackList(
        [MutateNumpyLogs(), MutateTensorFlowLogs(), AssertNumpyLogs(), AssertTensorFlowLogs()]
    )
    assert len(cb_list.callbacks) == 4
    for hook in ("on_epoch_begin", "on_epoch_end", "on_predict_batch_begin", "on_predict_batch_end",
                 "on_test_batch_begin", "on_test_batch_end", "on_train_batch_begin",
                 "on_train_batch_end"):  # fmt: skip
        getattr(cb_list, hook)(0, logs={"all": 0})
    for hook in ("on_predict_begin", "on_predict_end", "on_test_begin", "on_test_end",
                 "on_train_begin", "on_train_end"):  # fmt: skip
        getattr(cb_list, hook)(logs={"all": 0})
    # Every callback sees the other kind's changes, whichever kind of logs it takes.
    assert len(seen) == 2 * 14
    assert all(logs == {"all": 0, "numpy": 1, "tf": 2} for logs in seen), seen


@pytest.mark.follows("test_default_callbacks_no_warning")
def test_default_callbacks_no_warning():
    from tf_keras.src import callbacks as keras_callbacks

    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile("sgd", loss="mse")
    warnings = []
    with tf.compat.v1.test.mock.patch.object(keras_callbacks.logging, "warning", warnings.append):
        model.fit(np.ones((16, 1), "float32"), np.ones((16, 1), "float32"), batch_size=4, epochs=1)
    assert warnings == []


@pytest.mark.follows("test_trivial_backup_restore")
def test_trivial_backup_restore(tmp_path):
    """The original's call is never run there (its body needs eager mode, which its
    decorator skips); what its IPU Keras does with it: the IPU data handler takes
    epochs=0 (no epoch runs), and BackupAndRestore refuses the IPUStrategy when training
    begins (its keras/callbacks.py `_supported_strategies`). Whole batches of 5 here: the
    call's default 32 would leave a partial batch, which the IPU's Keras refuses first."""
    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.build((None, 1))
    weights = model.get_weights()
    x, y = np.ones((10, 1)), np.ones((10, 1))
    history = model.fit(x, y, batch_size=5, epochs=0, verbose=0)
    assert history.history == {}
    for before, after in zip(weights, model.get_weights(), strict=True):
        np.testing.assert_array_equal(before, after)  # no epoch: nothing trained
    backup = keras.callbacks.BackupAndRestore(str(tmp_path))
    with pytest.raises(NotImplementedError, match="IPUStrategyV1'?>? is not supported yet"):
        model.fit(x, y, batch_size=5, epochs=0, callbacks=[backup], verbose=0)


@pytest.mark.follows("test_ModelCheckpoint_subclass_save_weights_false")
def test_model_checkpoint_subclass_save_weights_false(tmp_path):
    model = model_from_layers(
        [keras.layers.Dense(NUM_HIDDEN, activation="relu"),
         keras.layers.Dense(NUM_CLASSES, activation="softmax")],
        (INPUT_DIM,),
        "subclass",
    )  # fmt: skip
    model.compile(loss="categorical_crossentropy", optimizer="rmsprop", metrics=["acc"])
    path = tmp_path / "checkpoint"
    checkpoint = keras.callbacks.ModelCheckpoint(str(path), save_weights_only=False)
    (x_train, y_train), _ = _categorical_data()
    model.fit(x_train, y_train.astype(np.int32), callbacks=[checkpoint], epochs=1,
              batch_size=10, verbose=0)  # fmt: skip
    assert "saved_model.pb" in {p.name for p in path.iterdir()}  # a SavedModel directory


def _summaries(logdir, kind="scalars"):
    """{(run folder relative to `logdir`, tag)} of the summaries of `kind` in the event files
    under `logdir` (TF2 summaries, written as tensors, counted by their plugin's kind, as the
    original's `list_summaries`), and the graphs written."""
    found, graphs = set(), []
    plugins = {"scalars": "scalars", "images": "images", "histograms": "histograms"}
    for path in pathlib.Path(logdir).rglob("events.out.*"):
        run = str(path.parent.relative_to(logdir))
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            if event.graph_def:
                graphs.append(event.graph_def)
            for value in event.summary.value:
                which = value.WhichOneof("value")
                if which == "tensor" and value.tag != "keras":
                    which = plugins.get(value.metadata.plugin_data.plugin_name, "tensors")
                else:
                    which = {"simple_value": "scalars", "tensor": "tensors"}.get(which, which)
                if which == kind:
                    found.add((run, value.tag))
    return found, graphs


def _tensorboard_model(model_type="sequential", compile_model=True):
    layers = [keras.layers.Conv2D(8, (3, 3)), keras.layers.Flatten(), keras.layers.Dense(1)]
    model = model_from_layers(layers, (10, 10, 1), model_type)
    if compile_model:
        model.compile(keras.optimizers.legacy.SGD(learning_rate=0.001), "mse")
    return model


def _tensorboard_fit(model, callback, validation=True, epochs=2, verbose=1):
    """Fits as the original's tests do: with the progress bar (fit's default verbosity),
    whose batch hooks make Keras call every callback's, TensorBoard's too (its batch
    summaries and the train graph are written from them)."""
    x, y = np.ones((10, 10, 10, 1)), np.ones((10, 1))
    model.fit(x, y, batch_size=2, epochs=epochs, verbose=verbose, callbacks=[callback],
              validation_data=(x, y) if validation else None)  # fmt: skip


EPOCH_SCALARS = {
    ("train", "epoch_loss"),
    ("validation", "epoch_loss"),
    ("validation", "evaluation_loss_vs_iterations"),
}


@pytest.mark.follows("test_TensorBoard_default_logdir")
def test_tensorboard_default_logdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tensorboard_fit(_tensorboard_model(), keras.callbacks.TensorBoard())  # no logdir given
    scalars, _ = _summaries(tmp_path)
    assert scalars == {(f"logs/{run}", tag) for run, tag in EPOCH_SCALARS}


@pytest.mark.follows("test_TensorBoard_across_invocations")
def test_tensorboard_across_invocations(tmp_path):
    model, callback = _tensorboard_model(), keras.callbacks.TensorBoard(str(tmp_path))
    for _ in range(2):
        _tensorboard_fit(model, callback)
    assert _summaries(tmp_path)[0] == EPOCH_SCALARS


@pytest.mark.follows("test_TensorBoard_no_spurious_event_files")
def test_tensorboard_no_spurious_event_files(tmp_path):
    _tensorboard_fit(_tensorboard_model(), keras.callbacks.TensorBoard(str(tmp_path)), False)
    runs = {p.parent.name for p in tmp_path.rglob("events.out.*")}
    assert runs == {"train"}


@pytest.mark.follows("test_TensorBoard_batch_metrics")
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_tensorboard_batch_metrics(tmp_path, model_type):
    callback = keras.callbacks.TensorBoard(str(tmp_path), update_freq=1)
    _tensorboard_fit(_tensorboard_model(model_type), callback)
    assert _summaries(tmp_path)[0] == EPOCH_SCALARS | {("train", "batch_loss")}


def _cosine_decay_model():
    model = _tensorboard_model(compile_model=False)
    schedule = keras.optimizers.schedules.CosineDecay(0.01, 1)
    model.compile(keras.optimizers.legacy.SGD(schedule), "mse")
    return model


@pytest.mark.follows("test_TensorBoard_learning_rate_schedules")
def test_tensorboard_learning_rate_schedules(tmp_path):
    _tensorboard_fit(_cosine_decay_model(), keras.callbacks.TensorBoard(str(tmp_path)), False)
    assert _summaries(tmp_path)[0] == {("train", "epoch_loss"), ("train", "epoch_learning_rate")}


@pytest.mark.follows("test_TensorBoard_global_step")
def test_tensorboard_global_step(tmp_path):
    callback = keras.callbacks.TensorBoard(
        str(tmp_path), update_freq=1, profile_batch=0, write_steps_per_second=True
    )
    _tensorboard_fit(_cosine_decay_model(), callback, False, verbose=0)
    assert _summaries(tmp_path)[0] == {
        ("train", "epoch_loss"),
        ("train", "batch_loss"),
        ("train", "epoch_learning_rate"),
        ("train", "epoch_steps_per_second"),
        ("train", "batch_steps_per_second"),
    }


@pytest.mark.follows("test_TensorBoard_projector_callback")
def test_tensorboard_projector_callback(tmp_path):
    layers = [
        keras.layers.Embedding(10, 10, name="test_embedding"),
        keras.layers.Dense(10, activation="relu"),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
    model = model_from_layers(layers, (10,), "functional")
    model.compile(optimizer="adam", loss=keras.losses.BinaryCrossentropy(from_logits=True))
    x, y = np.ones((10, 10)), np.ones((10, 10))
    callback = keras.callbacks.TensorBoard(
        str(tmp_path), embeddings_freq=1, embeddings_metadata={"test_embedding": "metadata.tsv"}
    )
    model.fit(x, y, batch_size=2, epochs=2, validation_data=(x, y), callbacks=[callback],
              verbose=0)  # fmt: skip
    assert (tmp_path / "projector_config.pbtxt").read_text().splitlines(keepends=True) == [
        "embeddings {\n",
        '  tensor_name: "layer_with_weights-0/embeddings/.ATTRIBUTES/VARIABLE_VALUE"\n',
        '  metadata_path: "metadata.tsv"\n',
        "}\n",
    ]


@pytest.mark.follows("test_TensorBoard_invalid_argument")
def test_tensorboard_invalid_argument():
    with pytest.raises(ValueError, match="Unrecognized arguments"):
        keras.callbacks.TensorBoard(wwrite_images=True)


@pytest.mark.follows("test_TensorBoard_non_blocking")
def test_tensorboard_non_blocking(tmp_path):
    callback = keras.callbacks.TensorBoard(str(tmp_path))
    assert callback._supports_tf_logs  # noqa: SLF001 - what the original checks
    model = keras.Sequential([keras.layers.Dense(1)])
    cb_list = keras.callbacks.CallbackList([callback], model=model, epochs=1, steps=100,
                                           verbose=0)  # fmt: skip
    logs = {"metric": _tensor_refusing_numpy()}
    _run_hooks(cb_list, logs)
    cb_list.on_predict_begin(logs)
    cb_list.on_predict_batch_begin(logs)
    cb_list.on_predict_batch_end(logs)
    cb_list.on_predict_end(logs)


def _check_keras_model_written(model, tmp_path):
    callback = keras.callbacks.TensorBoard(str(tmp_path), write_graph=True, profile_batch=0)
    _tensorboard_fit(model, callback, epochs=3)
    tensors, graphs = _summaries(tmp_path, "tensors")
    assert tensors == {("train", "keras")}
    assert len(graphs) == 1  # one train graph, with every layer in it
    for layer in model.layers:
        if "input" not in layer.name:
            assert layer.name in str(graphs[0])


@pytest.mark.follows("test_TensorBoard_writeSequentialModel_noInputShape")
def test_tensorboard_write_sequential_model_no_input_shape(tmp_path):
    model = keras.Sequential(
        [keras.layers.Conv2D(8, (3, 3)), keras.layers.Flatten(), keras.layers.Dense(1)]
    )
    model.compile("sgd", "mse")
    _check_keras_model_written(model, tmp_path)


@pytest.mark.follows("test_TensorBoard_writeSequentialModel_withInputShape")
def test_tensorboard_write_sequential_model_with_input_shape(tmp_path):
    model = keras.Sequential(
        [
            keras.layers.Conv2D(8, (3, 3), input_shape=(10, 10, 1)),
            keras.layers.Flatten(),
            keras.layers.Dense(1),
        ]
    )
    model.compile("sgd", "mse")
    _check_keras_model_written(model, tmp_path)


@pytest.mark.follows("test_TensorBoard_writeModel")
def test_tensorboard_write_model(tmp_path):
    inputs = keras.layers.Input([10, 10, 1])
    x = keras.layers.Conv2D(8, (3, 3), activation="relu")(inputs)
    model = keras.Model(inputs, [keras.layers.Dense(1)(keras.layers.Flatten()(x))])
    model.compile("sgd", "mse")
    _check_keras_model_written(model, tmp_path)


@pytest.mark.follows("test_fit_with_ModelCheckpoint_with_tf_config")
def test_fit_with_model_checkpoint_with_tf_config(tmp_path, monkeypatch):
    model, train = _checkpointed_model()
    callback = keras.callbacks.ModelCheckpoint(str(tmp_path / "checkpoint.h5"))
    cluster = {"cluster": {"worker": ["localhost:23333"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
    # fit works whether TF_CONFIG is set or not.
    model.fit(train, epochs=1, callbacks=[callback], verbose=0)
    assert (tmp_path / "checkpoint.h5").exists()


def _unreachable_post(*args, **kwargs):
    raise requests.exceptions.ConnectionError("unreachable")


@pytest.mark.follows("test_RemoteMonitor")
def test_remote_monitor(monkeypatch):
    # The default address is unreachable: a warning, not an error (no network needed here).
    monkeypatch.setattr(requests, "post", _unreachable_post)
    keras.callbacks.RemoteMonitor().on_epoch_end(0, logs={"loss": 0.0})


@pytest.mark.follows("test_RemoteMonitor_np_array")
def test_remote_monitor_np_array():
    with tf.compat.v1.test.mock.patch.object(requests, "post") as post:
        monitor = keras.callbacks.RemoteMonitor(send_as_json=True)
        monitor.on_epoch_end(0, logs={"loss": 0.0, "val": np.arange(1)})  # a 1 by 1 array
    post.assert_called_once_with(
        monitor.root + monitor.path,
        json={"loss": 0.0, "epoch": 0, "val": 0},
        headers=monitor.headers,
    )


@pytest.mark.follows("test_RemoteMonitor_np_float32")
def test_remote_monitor_np_float32():
    with tf.compat.v1.test.mock.patch.object(requests, "post") as post:
        monitor = keras.callbacks.RemoteMonitor(send_as_json=True)
        monitor.on_epoch_end(0, logs={"loss": 0.0, "val": np.float32(1.0)})
    post.assert_called_once_with(
        monitor.root + monitor.path,
        json={"loss": 0.0, "epoch": 0, "val": 1.0},
        headers=monitor.headers,
    )


@pytest.mark.follows("test_RemoteMonitorWithJsonPayload")
def test_remote_monitor_with_json_payload():
    (x_train, y_train), (x_test, y_test) = _categorical_data()
    model = _small_mlp()
    model.compile(loss="categorical_crossentropy", optimizer="rmsprop", metrics=["accuracy"])
    with tf.compat.v1.test.mock.patch.object(requests, "post") as post:
        model.fit(x_train, y_train.astype(np.int32), batch_size=BATCH_SIZE, epochs=1, verbose=0,
                  validation_data=(x_test, y_test.astype(np.int32)),
                  callbacks=[keras.callbacks.RemoteMonitor(send_as_json=True)])  # fmt: skip
    (_, kwargs) = post.call_args
    assert post.call_count == 1 and kwargs["json"]["epoch"] == 0
    assert set(kwargs["json"]) == {"epoch", "loss", "accuracy", "val_loss", "val_accuracy"}


def _trace_files(logdir):
    """The profiler traces written under `logdir`: TensorFlow 2.21's profiler writes one as
    plugins/profile/<run>/<host>.xplane.pb under the callback's log dir (the original's
    TensorFlow, a .trace.json.gz under its train run's)."""
    return len(list((pathlib.Path(logdir) / "plugins" / "profile").rglob("*.xplane.pb")))


def _traced_fit(logdir, profile_batch, batch_size=2, epochs=2, integers=False):
    """Fits the original's Sequential model with a TensorBoard callback profiling
    `profile_batch`; gives the tensor summaries written."""
    dtype = np.int32 if integers else np.float64
    x, y = np.ones((10, 10, 10, 1), dtype), np.ones((10, 1), dtype)
    model = keras.Sequential(
        [
            keras.layers.Conv2D(8, (3, 3), input_shape=(10, 10, 1)),
            keras.layers.Flatten(),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.legacy.SGD(learning_rate=0.001), "mse")
    callback = keras.callbacks.TensorBoard(
        str(logdir), histogram_freq=1, profile_batch=profile_batch, write_graph=False
    )
    model.fit(x, y, batch_size=batch_size, epochs=epochs, validation_data=(x, y), verbose=0,
              callbacks=[callback])  # fmt: skip
    return model, callback, _summaries(logdir, "tensors")[0]


@pytest.mark.follows("test_TensorBoard_autoTrace")
def test_tensorboard_auto_trace(tmp_path):
    _, _, tensors = _traced_fit(tmp_path, 1)
    assert tensors == {("train", "batch_1")}
    assert _trace_files(tmp_path) == 1


@pytest.mark.follows("test_TensorBoard_autoTrace_outerProfiler")
def test_tensorboard_auto_trace_outer_profiler(tmp_path):
    # A profiler session of the program's own: the callback makes no trace, and no error.
    tf.profiler.experimental.start(logdir="")
    try:
        _, _, tensors = _traced_fit(tmp_path, 1)
    finally:
        tf.profiler.experimental.stop(save=False)
    assert tensors == {("train", "batch_1")}
    assert _trace_files(tmp_path) == 0


@pytest.mark.follows("test_TensorBoard_autoTrace_tagNameWithBatchNum")
def test_tensorboard_auto_trace_tag_name_with_batch_num(tmp_path):
    _, _, tensors = _traced_fit(tmp_path, 2)
    assert tensors == {("train", "batch_2")}
    assert _trace_files(tmp_path) == 1


@pytest.mark.follows("test_TensorBoard_autoTrace_profileBatchRangeSingle")
def test_tensorboard_auto_trace_profile_batch_range_single(tmp_path):
    _, _, tensors = _traced_fit(tmp_path, "2,2", batch_size=5, integers=True)
    assert tensors == {("train", "batch_2")}  # logged at the batch the profiling stops
    assert _trace_files(tmp_path) == 1


@pytest.mark.slow
@pytest.mark.follows("test_TensorBoard_autoTrace_profileBatchRangeTwice")
def test_tensorboard_auto_trace_profile_batch_range_twice(tmp_path):
    model, callback, _ = _traced_fit(tmp_path, "10,10", batch_size=5, epochs=10, integers=True)
    time.sleep(1)  # the second profile must not overwrite the first
    x, y = np.ones((10, 10, 10, 1), np.int32), np.ones((10, 1), np.int32)
    model.fit(x, y, batch_size=5, epochs=10, validation_data=(x, y), verbose=0,
              callbacks=[callback])  # fmt: skip
    assert _trace_files(tmp_path) == 2


@pytest.mark.follows("test_TensorBoard_autoTrace_profileBatchRange")
def test_tensorboard_auto_trace_profile_batch_range(tmp_path):
    _, _, tensors = _traced_fit(tmp_path, "1,3", batch_size=5, integers=True)
    assert tensors == {("train", "batch_3")}
    assert _trace_files(tmp_path) == 1


@pytest.mark.follows("test_TensorBoard_autoTrace_profileInvalidBatchRange")
@pytest.mark.parametrize("profile_batch", ["-1,3", "1,None", "6,5", -1])
def test_tensorboard_auto_trace_profile_invalid_batch_range(tmp_path, profile_batch):
    with pytest.raises(ValueError):
        keras.callbacks.TensorBoard(
            str(tmp_path), histogram_freq=1, profile_batch=profile_batch, write_graph=False
        )


@pytest.mark.follows("test_TensorBoard_autoTrace_profile_batch_largerThanBatchCount")
def test_tensorboard_auto_trace_profile_batch_larger_than_batch_count(tmp_path):
    _, _, tensors = _traced_fit(tmp_path, 10000)
    assert tensors == set()  # only the 10000th batch would be traced
    assert _trace_files(tmp_path) == 0
