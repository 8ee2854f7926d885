"""The IPU GroupNormalization layer against numpy (strided and contiguous grouping) and Keras."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.keras.layers import GroupNorm, GroupNormalization

RNG = np.random.default_rng(6)


def numpy_group_norm(x, groups, epsilon, strided, channels_axis=-1):
    """Reshape the channels into (group, member) or (member, group) and normalise per group."""
    x = np.moveaxis(x.astype(np.float64), channels_axis, -1)
    channels = x.shape[-1]
    split = (channels // groups, groups) if strided else (groups, channels // groups)
    grouped = x.reshape(x.shape[0], -1, *split)
    group_axis = 3 if strided else 2
    reduce_axes = tuple(a for a in range(1, 4) if a != group_axis)
    mean = grouped.mean(axis=reduce_axes, keepdims=True)
    var = grouped.var(axis=reduce_axes, keepdims=True)
    out = ((grouped - mean) / np.sqrt(var + epsilon)).reshape(x.shape)
    return np.moveaxis(out, -1, channels_axis)


@pytest.mark.parametrize("strided", [True, False])
@pytest.mark.parametrize(
    "shape, channels_axis", [((3, 8), -1), ((2, 4, 5, 8), -1), ((2, 8, 3, 3), 1)]
)
def test_matches_numpy(shape, channels_axis, strided):
    x = RNG.normal(size=shape).astype(np.float32) * 2 + 1
    layer = GroupNormalization(
        groups=4, channels_axis=channels_axis, strided_channel_grouping=strided
    )
    expected = numpy_group_norm(x, 4, 0.001, strided, channels_axis)
    np.testing.assert_allclose(layer(x), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer(x, training=True), layer(x, training=False))
    jitted = tf.function(layer, jit_compile=True)(x)
    np.testing.assert_allclose(jitted, expected, rtol=1e-4, atol=1e-5)


def test_strided_grouping_is_a_channel_permutation_of_contiguous_grouping():
    x = RNG.normal(size=(2, 5, 6)).astype(np.float32)
    # Channel c of group c % 3 moves to position (c % 3) * 2 + c // 3 in contiguous layout.
    to_contiguous = [(c % 3) * 2 + c // 3 for c in range(6)]
    permuted = np.empty_like(x)
    permuted[..., to_contiguous] = x
    strided = GroupNormalization(groups=3)(x).numpy()
    contiguous = GroupNormalization(groups=3, strided_channel_grouping=False)(permuted).numpy()
    np.testing.assert_allclose(strided, contiguous[..., to_contiguous], rtol=1e-5, atol=1e-6)


def test_contiguous_grouping_matches_keras_group_normalization_with_weights():
    x = RNG.normal(size=(4, 3, 6)).astype(np.float32)
    ours = GroupNormalization(groups=2, strided_channel_grouping=False, epsilon=1e-3)
    stock = tf_keras.layers.GroupNormalization(groups=2, epsilon=1e-3)
    ours.build(x.shape)
    stock.build(x.shape)
    gamma, beta = RNG.normal(size=6).astype(np.float32), RNG.normal(size=6).astype(np.float32)
    ours.set_weights([gamma, beta])  # the original's order
    stock.set_weights([gamma, beta])
    with tf.GradientTape(persistent=True) as tape:
        xt = tf.constant(x)
        tape.watch(xt)
        got, want = ours(xt), stock(xt)
        got_loss, want_loss = tf.reduce_sum(got**2), tf.reduce_sum(want**2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        tape.gradient(got_loss, xt), tape.gradient(want_loss, xt), rtol=1e-3, atol=1e-4
    )
    for ours_grad, stock_grad in zip(
        tape.gradient(got_loss, [ours.gamma, ours.beta]),
        tape.gradient(want_loss, [stock.gamma, stock.beta]),
        strict=True,
    ):
        np.testing.assert_allclose(ours_grad, stock_grad, rtol=1e-3, atol=1e-4)


def test_weights_default_to_an_identity_affine_map_and_can_be_left_out():
    layer = GroupNormalization(groups=2)
    layer.build((None, 4))
    np.testing.assert_array_equal(layer.beta, np.zeros(4))
    np.testing.assert_array_equal(layer.gamma, np.ones(4))
    bare = GroupNormalization(groups=2, center=False, scale=False)
    bare.build((None, 4))
    assert bare.weights == []
    custom = GroupNormalization(
        groups=2, gamma_initializer="zeros", beta_initializer=tf_keras.initializers.Constant(3.0)
    )
    np.testing.assert_allclose(custom(np.ones((2, 4), np.float32)), np.full((2, 4), 3.0))


def test_alias_config_and_output_shape():
    assert GroupNorm is GroupNormalization
    layer = GroupNormalization(
        groups=3,
        channels_axis=1,
        epsilon=1e-5,
        strided_channel_grouping=False,
        gamma_initializer="ones",
        name="gn",
    )
    assert layer.compute_output_shape((None, 6, 2)) == (None, 6, 2)
    config = layer.get_config()
    assert config["groups"] == 3 and config["channels_axis"] == 1 and config["epsilon"] == 1e-5
    assert config["strided_channel_grouping"] is False and config["beta_initializer"] is None
    assert GroupNormalization.from_config(config).get_config() == config


@pytest.mark.parametrize(
    "kwargs, shape, message",
    [
        ({"groups": 3}, (2, 8), "8 channels is not commensurate with 3 groups"),
        ({"groups": 16}, (2, 8), "invalid groups 16 for 8 channels"),
        ({"channels_axis": 2}, (2, 4, 4, 8), "channels dimension must be 1 or the last"),
        ({"channels_axis": 5}, (2, 8), "channels_axis 5 is out of bounds for rank 2"),
        ({}, (2, None), r"undefined channels dimension 1"),
    ],
)
def test_build_errors(kwargs, shape, message):
    with pytest.raises(ValueError, match=message):
        GroupNormalization(**kwargs).build(shape)
