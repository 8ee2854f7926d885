"""The IPU Dropout layer: inference identity, training statistics, seeds, gradients."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.keras.layers import Dropout
from openipu._src.system import seeds

X = np.random.default_rng(0).uniform(1, 2, size=(32, 64)).astype(np.float32)


def test_inference_returns_the_inputs():
    layer = Dropout(0.5)
    np.testing.assert_array_equal(layer(X, training=False), X)
    np.testing.assert_array_equal(layer(X), X)  # learning phase 0 outside fit


def test_training_drops_about_rate_and_keeps_the_expected_sum():
    # 65536 values: both statistics within 0.03 is over ten standard deviations.
    x = np.random.default_rng(1).uniform(1, 2, size=(256, 256)).astype(np.float32)
    out = Dropout(0.3)(x, training=True).numpy()
    assert abs((out == 0).mean() - 0.3) < 0.03
    assert abs(out.mean() / x.mean() - 1) < 0.03
    kept = out != 0
    np.testing.assert_allclose(out[kept], x[kept] / 0.7, rtol=1e-6)


def test_seeded_layer_repeats_its_mask():
    layer = Dropout(0.5, seed=[4, 2])
    first = layer(X, training=True)
    np.testing.assert_array_equal(layer(X, training=True), first)
    np.testing.assert_array_equal(Dropout(0.5, seed=(4, 2))(X, training=True), first)


def test_unseeded_layer_repeats_after_reset_ipu_seed():
    layer = Dropout(0.5)
    seeds.reset_ipu_seed(21)
    first = layer(X, training=True).numpy()
    seeds.reset_ipu_seed(21)
    np.testing.assert_array_equal(layer(X, training=True), first)


def test_gradient_is_zero_exactly_where_the_output_is():
    layer = Dropout(0.4, seed=[1, 1])
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = layer(x, training=True)
        total = tf.reduce_sum(out)
    np.testing.assert_allclose(
        tape.gradient(total, x), np.where(out.numpy() == 0, 0, 1 / 0.6), rtol=1e-6
    )


def test_noise_shape_and_jit():
    layer = Dropout(0.5, noise_shape=[None, 1], seed=[3, 3])
    out = tf.function(lambda v: layer(v, training=True), jit_compile=True)(X).numpy()
    assert np.all((out == 0).all(axis=1) | (out != 0).all(axis=1))
    np.testing.assert_array_equal(layer(X, training=True), out)


def test_the_layer_has_no_weights():
    model = tf_keras.Sequential([tf_keras.Input((64,)), Dropout(0.5), Dropout(0.5, seed=[1, 2])])
    assert model.weights == [] and model.layers[0].variables == []


def test_fit_uses_training_mode():
    model = tf_keras.Sequential([tf_keras.Input((64,)), Dropout(0.5), tf_keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(X, np.ones((32, 1)), batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_compute_output_shape_and_config():
    layer = Dropout(0.25, noise_shape=[None, 1], seed=np.array([5, 6]), name="drop")
    assert layer.compute_output_shape((None, 7)) == (None, 7)
    config = layer.get_config()
    assert (
        config["rate"] == 0.25 and config["seed"] == [5, 6] and config["noise_shape"] == [None, 1]
    )
    assert Dropout.from_config(config).get_config() == config


@pytest.mark.parametrize("rate", [1.0, -0.5])
def test_rate_must_be_in_zero_one_when_the_layer_drops(rate):
    # As the original (addons keras/layers/dropout.py): the layer keeps the rate as given and
    # the dropout op refuses it in training; inference passes the inputs through.
    x = np.ones([2, 3], np.float32)
    layer = Dropout(rate)
    np.testing.assert_array_equal(layer(x, training=False), x)
    with pytest.raises(
        ValueError, match=f"The rate must be in the range \\[0, 1\\), but was {rate}"
    ):
        layer(x, training=True)


def test_seed_must_be_a_pair_when_the_layer_drops():
    layer = Dropout(0.5, seed=[1, 2, 3])
    with pytest.raises(ValueError, match=r"Expected the seed to have a shape \[2\]"):
        layer(np.ones([2, 3], np.float32), training=True)


def test_the_originals_hidden_ref_argument_is_kept_in_the_config():
    # Configs saved by the original carry `ref`: they must load.
    config = Dropout(0.5, ref=False).get_config()
    assert config["ref"] is False and Dropout(0.5).get_config()["ref"] is True
    assert Dropout.from_config(config).get_config() == config
