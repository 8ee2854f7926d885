"""Conformance: graphcore/keras `keras/ipu/execution_parameters_test.py`.

`steps_per_execution` not divisible by the gradient accumulation steps per replica is
a RuntimeError naming both values, on one IPU and with 8 replicas.
"""

from __future__ import annotations

import pytest
import tensorflow as tf
import tf_keras as keras


def _dataset(length):
    x = tf.constant(1.0, shape=[32])
    y = tf.constant(0.2, shape=[2])
    return tf.data.Dataset.from_tensors((x, y)).repeat(length).batch(1, drop_remainder=True)


def _sequential():
    return keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(4), keras.layers.Dense(2)])


def _functional():
    inputs = keras.layers.Input(32)
    x = keras.layers.Dense(4)(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(2)(x))


MESSAGE = (
    r"The model has been configured to use gradient accumulation for training, however the "
    r"current `steps_per_execution` value \(set to 8\) is not divisible by "
    r"`gradient_accumulation_steps_per_replica` \(3\)"
)


def _check(strategy, model_fn, length):
    with strategy.scope():
        model = model_fn()
        model.compile("sgd", loss="mse", steps_per_execution=8)
        with pytest.raises(RuntimeError, match=MESSAGE):
            model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=3)
            model.fit(_dataset(length), verbose=0)


@pytest.mark.follows("testGradientAccumulation")
@pytest.mark.parametrize("model_fn", [_sequential, _functional])
def test_gradient_accumulation(strategy_on, model_fn):
    _check(strategy_on(1), model_fn, 8)


@pytest.mark.follows("testGradientAccumulationReplicated")
@pytest.mark.parametrize("model_fn", [_sequential, _functional])
def test_gradient_accumulation_replicated(strategy_on, model_fn):
    _check(strategy_on(8), model_fn, 64)
