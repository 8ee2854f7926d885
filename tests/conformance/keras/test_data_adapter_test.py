"""Conformance: graphcore/keras `keras/ipu/extensions/data_adapter_test.py`.

The original drives its `IPUDataHandler` by hand; openipu's data handler is internal, so
these tests follow the same scenarios through `fit` and `predict` of a model inside an
IPUStrategy, which is how programs reach it: a layer adds up the data it sees, so each
epoch's sum tells which elements it read (partly consumed datasets continue where they
stopped, datasets read whole restart), numpy data with sample weights, and the
original's errors (partial batches, an iterator, class weights, too little data, too
little data for the replicas, `steps_per_execution` not dividing the batches).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from single_ipu_checks import assert_close


class SumOfInputs(keras.layers.Layer):
    """Passes its input through, adding it up in a variable."""

    def build(self, input_shape):
        self.total = self.add_weight("total", (), initializer="zeros", trainable=False)

    def call(self, inputs):
        self.total.assign_add(tf.reduce_sum(tf.cast(inputs, tf.float32)))
        return tf.cast(inputs, tf.float32)


class EpochSums(keras.callbacks.Callback):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.sums = []

    def on_epoch_end(self, epoch, logs=None):
        self.sums.append(float(self.layer.total.numpy()))
        self.layer.total.assign(0.0)


def _epoch_sums(strategy, *data, **fit_kwargs):
    """The sum of the inputs each epoch of `fit` read."""
    with strategy.scope():
        inputs = keras.Input((1,))
        recorder = SumOfInputs()
        outputs = keras.layers.Dense(1, kernel_initializer="zeros")(recorder(inputs))
        model = keras.Model(inputs, outputs)
        model.compile("sgd", "mse")
        sums = EpochSums(recorder)
        model.fit(*data, callbacks=[sums], verbose=0, **fit_kwargs)
    return sums.sums


def _pairs(values):
    """A dataset of (x, x) of the values, batches of 1."""
    dataset = tf.data.Dataset.from_tensor_slices(np.asarray(values, np.float32).reshape(-1, 1))
    return dataset.map(lambda x: (x, x))


@pytest.mark.follows("test_finite_dataset_with_steps_per_epoch")
def test_finite_dataset_with_steps_per_epoch(strategy_on):
    data = _pairs([0, 1, 2, 3]).batch(1, drop_remainder=True)
    # Partly consumed: the second epoch continues where the first stopped.
    assert _epoch_sums(strategy_on(1), data, epochs=2, steps_per_epoch=2) == [0 + 1, 2 + 3]


@pytest.mark.follows("test_finite_dataset_without_steps_per_epoch")
def test_finite_dataset_without_steps_per_epoch(strategy_on):
    data = _pairs([0, 1, 2]).batch(1, drop_remainder=True)
    assert _epoch_sums(strategy_on(1), data, epochs=2) == [3, 3]


@pytest.mark.follows("test_finite_dataset_with_steps_per_epoch_exact_size")
def test_finite_dataset_with_steps_per_epoch_exact_size(strategy_on):
    data = _pairs([0, 1, 2, 3]).batch(1, drop_remainder=True)
    # Its exact size as steps_per_epoch: each epoch reads it from the start.
    assert _epoch_sums(strategy_on(1), data, epochs=2, steps_per_epoch=4) == [6, 6]


@pytest.mark.follows("test_infinite_dataset_with_steps_per_epoch")
def test_infinite_dataset_with_steps_per_epoch(strategy_on):
    data = _pairs([0, 1, 2]).batch(1, drop_remainder=True).repeat()
    assert _epoch_sums(strategy_on(1), data, epochs=2, steps_per_epoch=3) == [3, 3]


def _filtered():
    dataset = _pairs([0, 1, 2, 3, 4, 5, 6]).filter(lambda x, y: x[0] < 4)
    assert dataset.cardinality().numpy() == tf.data.UNKNOWN_CARDINALITY
    return dataset.batch(1, drop_remainder=True)


@pytest.mark.follows("test_unknown_cardinality_dataset_with_steps_per_epoch")
def test_unknown_cardinality_dataset_with_steps_per_epoch(strategy_on):
    assert _epoch_sums(strategy_on(1), _filtered(), epochs=2, steps_per_epoch=2) == [1, 5]


@pytest.mark.follows("test_unknown_cardinality_dataset_without_steps_per_epoch")
def test_unknown_cardinality_dataset_without_steps_per_epoch(strategy_on):
    with pytest.raises(ValueError, match="Could not infer the size of"):
        _epoch_sums(strategy_on(1), _filtered(), epochs=2)


@pytest.mark.follows("test_numpy")
def test_numpy(strategy_on):
    strategy = strategy_on(1)
    x = np.array([[0.0], [1.0], [2.0]])
    y = np.array([[0.0], [2.0], [4.0]])
    sw = np.array([0.0, 4.0, 8.0])
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, kernel_initializer="ones", use_bias=False)])
        model.compile("sgd", "mse")
        loss = model.evaluate(x, y, sample_weight=sw, batch_size=1, verbose=0)
    # Per batch: weight * (x - y)^2, averaged over the three batches.
    assert_close(loss, np.mean(sw * (x[:, 0] - y[:, 0]) ** 2))
    assert _epoch_sums(strategy, x, y, epochs=2, batch_size=1, shuffle=False) == [3, 3]


@pytest.mark.follows("test_numpy_partial_batch")
def test_numpy_partial_batch(strategy_on):
    x = np.array([[0.0], [1.0], [2.0]])
    with pytest.raises(ValueError, match="The provided set of data has a partial batch"):
        _epoch_sums(strategy_on(1), x, x, epochs=2, batch_size=2)


@pytest.mark.follows("test_generator")
def test_generator(strategy_on):
    def generator():
        for _ in range(2):
            for step in range(3):
                yield np.array([[step]], np.float32), np.array([[step]], np.float32)

    with pytest.raises(ValueError, match=r"Please use `tf\.data\.Dataset\.from_generator\(\)`"):
        _epoch_sums(strategy_on(1), generator(), epochs=2, steps_per_epoch=3)


@pytest.mark.follows("test_iterator")
def test_iterator(strategy_on):
    batches = [(np.array([[s]], np.float32), np.array([[s]], np.float32)) for s in range(3)]
    with pytest.raises(ValueError, match=r"wrap your iterator inside a generator like so"):
        _epoch_sums(strategy_on(1), iter(batches * 2), epochs=2, steps_per_epoch=3)


@pytest.mark.follows("test_class_weight_user_errors")
def test_class_weight_user_errors(strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        with pytest.raises(ValueError, match="to be a dict with keys"):
            model.fit(
                np.array([[0.0], [1.0], [2.0]]),
                np.array([[2], [1], [0]]),
                batch_size=1,
                sample_weight=np.array([1.0, 2.0, 4.0]),
                class_weight={0: 0.5, 1: 1.0, 3: 1.5},  # no class 2
                verbose=0,
            )
        inputs = keras.Input((1,))
        two_outputs = keras.Model(inputs, [keras.layers.Dense(1)(inputs) for _ in range(2)])
        two_outputs.compile("sgd", "mse")
        with pytest.raises(ValueError, match="with a single output"):
            two_outputs.fit(
                np.ones((10, 1)),
                [np.ones((10, 1)), np.zeros((10, 1))],
                batch_size=2,
                class_weight={0: 0.5, 1: 1.0, 2: 1.5},
                verbose=0,
            )


@pytest.mark.follows("test_single_x_input_no_tuple_wrapping")
@pytest.mark.parametrize("use_numpy", [True, False])
def test_single_x_input_no_tuple_wrapping(strategy_on, use_numpy):
    x = np.ones((10, 1))
    batch_size = 2
    if not use_numpy:
        x = tf.data.Dataset.from_tensor_slices(x).batch(2, drop_remainder=True)
        batch_size = None
    seen = []

    class Check(keras.layers.Layer):
        def call(self, inputs):
            seen.append((isinstance(inputs, tf.Tensor), inputs.dtype))
            return inputs

    with strategy_on(1).scope():
        model = keras.Sequential([keras.Input((1,)), Check()])
        predicted = model.predict(x, batch_size=batch_size, verbose=0)
    assert_close(predicted, np.ones((10, 1)))
    assert seen and all(seen_entry == (True, tf.float32) for seen_entry in seen)


@pytest.mark.follows("test_size")
def test_size(strategy_on):
    data = _pairs(np.ones(10)).batch(2, drop_remainder=True)
    message = (
        r"Your input does not have enough data. Make sure that your dataset or generator can "
        r"generate at least 12 batches \(currently it can only generate 5 batches\)"
    )
    with pytest.raises(ValueError, match=message):
        _epoch_sums(strategy_on(1), data, epochs=2, steps_per_epoch=6)


@pytest.mark.follows("test_dataset_not_big_enough_with_replication")
def test_dataset_not_big_enough_with_replication(strategy_on):
    data = _pairs(np.ones(6)).batch(2, drop_remainder=True)
    message = (
        r"The provided dataset contains 3 items, but all 4 replicas are requested to run 1 "
        r"steps each. Make sure the dataset contains at least 4 items."
    )
    with pytest.raises(ValueError, match=message):
        _epoch_sums(strategy_on(4), data, epochs=1)


@pytest.mark.follows("test_steps_per_execution_not_divisor")
def test_steps_per_execution_not_divisor(strategy_on):
    data = _pairs(np.ones(8)).batch(2, drop_remainder=True)
    with strategy_on(1).scope():
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse", steps_per_execution=3)
        message = (
            r"`steps_per_execution` \(\d+\) must be a divisor of the number of batches "
            r"\(\d+\) in the dataset provided."
        )
        with pytest.raises(ValueError, match=message):
            model.fit(data, epochs=1, verbose=0)


@pytest.mark.follows("test_dataset_drop_batch_with_replication")
def test_dataset_drop_batch_with_replication(strategy_on):
    data = _pairs(np.ones(6)).repeat()
    # 7 steps on 4 replicas: the replicas run one step each, the rest is dropped (the
    # original only checks that this is no error).
    assert len(_epoch_sums(strategy_on(4), data, steps_per_epoch=7)) == 1


@pytest.mark.follows("test_insufficient_data")
def test_insufficient_data(strategy_on):
    data = _pairs([0, 1]).filter(lambda x, y: True).batch(1, drop_remainder=True)
    # The data runs out in the first epoch: training stops there, after what it read.
    assert _epoch_sums(strategy_on(1), data, epochs=2, steps_per_epoch=3) == [1]
