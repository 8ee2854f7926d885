"""The IPU InstanceNormalization layer against numpy per-channel statistics."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.keras.layers import InstanceNorm, InstanceNormalization

RNG = np.random.default_rng(12)


def numpy_instance_norm(x, epsilon):
    """Channels last: normalise every (entry, channel) over the spatial dimensions."""
    axes = tuple(range(1, x.ndim - 1))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon)


def test_matches_numpy_channels_last_and_first():
    x = RNG.normal(size=(2, 5, 4, 3)).astype(np.float32) * 3
    expected = numpy_instance_norm(x.astype(np.float64), 0.001)
    np.testing.assert_allclose(InstanceNormalization()(x), expected, rtol=1e-4, atol=1e-5)
    first = InstanceNormalization(channels_axis=1)(np.moveaxis(x, -1, 1))
    np.testing.assert_allclose(first, np.moveaxis(expected, -1, 1), rtol=1e-4, atol=1e-5)
    jitted = tf.function(InstanceNormalization(), jit_compile=True)(x)
    np.testing.assert_allclose(jitted, expected, rtol=1e-4, atol=1e-5)


def test_gamma_and_beta_are_per_channel():
    x = RNG.normal(size=(2, 6, 3)).astype(np.float32)
    layer = InstanceNormalization(epsilon=1e-5)
    layer.build(x.shape)
    beta, gamma = np.array([1.0, 2.0, 3.0], np.float32), np.array([0.5, -1.0, 2.0], np.float32)
    layer.set_weights([gamma, beta])  # the original's order
    expected = numpy_instance_norm(x.astype(np.float64), 1e-5) * gamma + beta
    np.testing.assert_allclose(layer(x), expected, rtol=1e-4, atol=1e-5)


def test_alias_config_and_output_shape():
    assert InstanceNorm is InstanceNormalization
    layer = InstanceNormalization(channels_axis=1, center=False, epsilon=0.01)
    assert layer.compute_output_shape((None, 3, 8)) == (None, 3, 8)
    config = layer.get_config()
    assert "groups" not in config and "strided_channel_grouping" not in config
    assert config["channels_axis"] == 1 and config["center"] is False and config["epsilon"] == 0.01
    assert InstanceNormalization.from_config(config).get_config() == config


def test_channels_must_be_known():
    with pytest.raises(ValueError, match="undefined channels dimension 2"):
        InstanceNormalization().build((2, 3, None))
