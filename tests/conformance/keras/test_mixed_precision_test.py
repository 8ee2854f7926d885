"""Conformance: graphcore/keras `keras/ipu/mixed_precision_test.py`.

A functional model under the `mixed_float16` policy trains in an IPUStrategy and in a
PopDistStrategy (one instance, one replica); the loss matches stock Keras's under the
same policy.
"""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras
from tensorflow.python.ipu import ipu_strategy
from tensorflow.python.ipu.distributed import popdist_strategy


def _run_model():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inputs = keras.layers.Input(shape=(32), dtype=np.single, batch_size=2)
        init = keras.initializers.Constant(0.1)
        x = keras.layers.Dense(4, name="layer0", kernel_initializer=init)(inputs)
        x = keras.layers.Dense(2, name="layer1", kernel_initializer=init)(x)
        model = keras.Model(inputs, x)
        model.compile("sgd", loss="mse", steps_per_execution=4)
        x = np.full([60, 32], 1.0, dtype=np.single)
        y = np.full([60], 1.0, dtype=np.single)
        history = model.fit(x, y, batch_size=2, steps_per_epoch=1, epochs=1, verbose=0)
        return history.history["loss"], model.layers[1].kernel.dtype
    finally:
        keras.mixed_precision.set_global_policy(None)  # back to the default (floatx) policy


def _reference_loss():
    model = None
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inputs = keras.layers.Input(shape=(32), batch_size=2)
        init = keras.initializers.Constant(0.1)
        x = keras.layers.Dense(4, kernel_initializer=init)(inputs)
        model = keras.Model(inputs, keras.layers.Dense(2, kernel_initializer=init)(x))
        model.compile("sgd", loss="mse")
        x = np.full([60, 32], 1.0, dtype=np.single)
        y = np.full([60], 1.0, dtype=np.single)
        return model.fit(x, y, batch_size=2, steps_per_epoch=1, epochs=1, verbose=0).history["loss"]
    finally:
        keras.mixed_precision.set_global_policy(None)  # back to the default (floatx) policy


def _check(strategy):
    with strategy.scope():
        loss, kernel_dtype = _run_model()
    assert kernel_dtype == "float32"  # mixed precision keeps float32 variables
    np.testing.assert_allclose(loss, _reference_loss(), rtol=1e-3)


@pytest.mark.follows("testIPUStrategy")
def test_ipu_strategy(strategy_on):
    strategy_on(1)
    _check(ipu_strategy.IPUStrategyV1())


@pytest.mark.follows("testPopDistStrategy")
def test_pop_dist_strategy(strategy_on):
    strategy_on(1)
    _check(popdist_strategy.PopDistStrategy())
