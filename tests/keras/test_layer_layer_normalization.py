"""The IPU LayerNormalization layer against the stock Keras LayerNormalization."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.keras.layers import LayerNorm, LayerNormalization

RNG = np.random.default_rng(13)


@pytest.mark.parametrize("axis", [-1, 1, [1, 2], (-2, -1)])
def test_matches_keras_layer_normalization(axis):
    x = tf.constant(RNG.normal(size=(3, 4, 5)).astype(np.float32) * 2 + 1)
    ours, stock = LayerNormalization(axis=axis), tf_keras.layers.LayerNormalization(axis=axis)
    ours.build(x.shape)
    stock.build(x.shape)
    gamma = RNG.normal(size=stock.gamma.shape).astype(np.float32)
    beta = RNG.normal(size=stock.beta.shape).astype(np.float32)
    stock.set_weights([gamma, beta])
    ours.set_weights([gamma, beta])  # gamma then beta in the axis dimensions, as the original
    weights = tf.constant(RNG.normal(size=(3, 4, 5)).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        got, want = ours(x), stock(x)
        got_loss, want_loss = tf.reduce_sum(got * weights), tf.reduce_sum(want * weights)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        tape.gradient(got_loss, x), tape.gradient(want_loss, x), rtol=1e-3, atol=1e-4
    )
    ours_grads = tape.gradient(got_loss, [ours.gamma, ours.beta])
    stock_grads = tape.gradient(want_loss, [stock.gamma, stock.beta])
    for got_grad, want_grad in zip(ours_grads, stock_grads, strict=True):
        np.testing.assert_allclose(got_grad, want_grad, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(tf.function(ours, jit_compile=True)(x), got, rtol=1e-5, atol=1e-6)


def test_float16_inputs():
    x = RNG.normal(size=(4, 8)).astype(np.float16)
    got = LayerNormalization(dtype="float16")(x)
    assert got.dtype == tf.float16
    reference = tf_keras.layers.LayerNormalization()(x.astype(np.float32))
    np.testing.assert_allclose(got.numpy().astype(np.float32), reference, rtol=1e-2, atol=1e-2)


def test_alias_config_and_output_shape():
    assert LayerNorm is LayerNormalization
    layer = LayerNormalization(axis=(1, 2), epsilon=1e-6, center=False, gamma_initializer="zeros")
    assert layer.compute_output_shape((None, 2, 3)) == (None, 2, 3)
    config = layer.get_config()
    assert config["axis"] == [1, 2] and config["epsilon"] == 1e-6 and config["center"] is False
    assert LayerNormalization.from_config(config).get_config() == config


@pytest.mark.parametrize(
    "axis, shape, message",
    [
        # The original's words (ipu_tensorflow_addons/keras/layers/normalization.py).
        (3, (2, 4), "^Invalid axis: 3"),
        ([1, -1], (2, 4), r"^Duplicate axis: \(1, 1\)"),
        (-1, (2, None), r"^Input shape \(2, None\) has unknown dimensions - all dimensions"),
    ],
)
def test_build_errors(axis, shape, message):
    with pytest.raises(ValueError, match=message):
        LayerNormalization(axis=axis).build(shape)


def test_axis_type_and_unsupported_arguments():
    with pytest.raises(
        ValueError,
        match="^Expected an int or a list/tuple of ints for the argument 'axis', but received "
        "instead: last",
    ):
        LayerNormalization(axis="last")
    with pytest.raises(
        NotImplementedError,
        match="^ipu_tensorflow_addons.keras.layers.LayerNormalization does not support "
        "__init__ argument gamma_regularizer",
    ):
        LayerNormalization(gamma_regularizer="l2")
