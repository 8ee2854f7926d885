"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/layers/dropout_test.py`.

The addons' `Dropout` layer: the share of dropped elements follows the rate, a user seed
gives the same mask every time, kept elements are scaled by 1 / (1 - rate), inference
passes the input through, the output is a single tensor, a rate of 1 is rejected with
the original's message, and the config round-trips.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from ipu_tensorflow_addons.keras import layers

RATES = [0.0, 0.1, 0.3, 0.5, 0.7, 0.99]


def _dropout(x, rate=0.5, seed=None, training=True):
    layer = layers.Dropout(dtype=np.float32, rate=rate, seed=seed, ref=False)
    layer.build(input_shape=None)
    return layer(inputs=x, training=training)


@pytest.mark.follows("test_dropout")
def test_dropout():
    rng = np.random.default_rng(42)
    x = rng.random(1000).astype(np.float32)
    for rate in RATES:
        dropped = 1 - np.count_nonzero(_dropout(x, rate).numpy()) / 1000
        # The original's bound (5% of the rate) or, for a random mask, 4 standard
        # deviations of the dropped share, whichever is wider.
        bound = max(0.05 * rate, 4 * np.sqrt(rate * (1 - rate) / 1000))
        assert abs(dropped - rate) <= bound, (rate, dropped)

    x = rng.random(100).astype(np.float32)
    first = _dropout(x, seed=[42, 42]).numpy()
    for _ in range(6):
        np.testing.assert_array_equal(_dropout(x, seed=[42, 42]).numpy(), first)

    ones = np.ones(1000, np.float32)
    for rate in RATES:
        result = _dropout(ones, seed=[42, 42], rate=rate).numpy()
        kept = result[np.nonzero(result)]
        np.testing.assert_allclose(kept, np.full(kept.shape, 1 / (1 - rate)), rtol=1e-6)


@pytest.mark.follows("testInference")
def test_inference():
    x = np.random.default_rng(0).random(100).astype(np.float32)
    np.testing.assert_allclose(_dropout(x, seed=[42, 42], training=False), x)


@pytest.mark.follows("testSingleOutputFromLayer")
def test_single_output_from_layer():
    x = np.random.default_rng(1).random(100).astype(np.float32)
    assert isinstance(_dropout(x, seed=[42, 42], training=True), tf.Tensor)


@pytest.mark.follows("testIllegalRate")
def test_illegal_rate():
    with pytest.raises(ValueError, match=r"The rate must be in the range \[0, 1\), but was 1"):
        _dropout(np.ones(1), rate=1)


@pytest.mark.follows("testGetConfig")
def test_get_config():
    layer = layers.Dropout(rate=0.5, seed=tf.constant([0, 0]))
    config = layer.get_config()
    assert layers.Dropout.from_config(config).get_config() == config
