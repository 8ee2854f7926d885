"""Shared by the pipelined-model conformance modules (pipeline_test, sequential_pipeline_test):
the original's constant datasets, its batch callback counter and the checks both files make."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras


def dataset(length=None, batch_size=1, x_val=1.0, y_val=0.2):
    ds = tf.data.Dataset.from_tensors(
        (tf.constant(x_val, shape=[32]), tf.constant(y_val, shape=[2]))
    )
    return ds.repeat(length).batch(batch_size, drop_remainder=True)


def inference_dataset(length=None, batch_size=1, x_val=1.0):
    ds = tf.data.Dataset.from_tensors(tf.constant(x_val, shape=[32])).repeat(length)
    return ds.batch(batch_size, drop_remainder=True)


class BatchCallbackCounter(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.count = 0

    def on_batch_end(self, batch, logs=None):
        self.count += 1


def check_history_of_floats(model) -> None:
    """fit (2 epochs, with an accuracy metric) gives a history of loss and accuracy, one
    Python float per epoch."""
    model.compile("sgd", loss="mse", metrics=["accuracy"], steps_per_execution=16)
    history = model.fit(dataset(), steps_per_epoch=16, epochs=2, verbose=0)
    assert list(history.history.keys()) == ["loss", "accuracy"]
    for values in history.history.values():
        assert type(values) is list and len(values) == 2
        assert all(type(v) is float for v in values)


def check_accumulated_outfeed_changes_nothing(model, accumulating, optimizer) -> None:
    """fit and evaluate give the same results and callback counts whether or not the
    outfeed is accumulated (`accumulating` has `accumulate_outfeed=True`)."""
    for m in (model, accumulating):
        m.compile(optimizer, loss="mse", metrics=["accuracy"], steps_per_execution=16)
    counters = [BatchCallbackCounter(), BatchCallbackCounter()]
    histories = [
        m.fit(dataset(), steps_per_epoch=16, epochs=10, callbacks=[c], verbose=0).history
        for m, c in zip((model, accumulating), counters, strict=True)
    ]
    for key in histories[0]:
        np.testing.assert_allclose(histories[0][key], histories[1][key], atol=1e-5, rtol=1e-5)
    assert counters[0].count == counters[1].count
    counters = [BatchCallbackCounter(), BatchCallbackCounter()]
    results = [
        m.evaluate(dataset(length=96), callbacks=[c], verbose=0)
        for m, c in zip((model, accumulating), counters, strict=True)
    ]
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)
    assert counters[0].count == counters[1].count


def check_fit_twice(model, first_dataset) -> None:
    """A second fit (same dataset, then a new one) lowers the loss and changes every weight."""
    first = model.fit(first_dataset, steps_per_epoch=16, verbose=0).history["loss"][0]
    before = model.get_weights()
    assert first > model.fit(first_dataset, steps_per_epoch=16, verbose=0).history["loss"][0]
    after = model.get_weights()
    assert all(np.any(a != b) for a, b in zip(before, after, strict=True))
    assert first > model.fit(dataset(), steps_per_epoch=16, verbose=0).history["loss"][0]
    assert all(np.any(a != b) for a, b in zip(after, model.get_weights(), strict=True))
