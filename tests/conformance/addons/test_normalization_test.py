"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/layers/normalization_test.py`.

The addons' GroupNormalization, LayerNormalization and InstanceNormalization layers
(without centre or scale, called in a `tf.function`) give outputs whose groups have mean
0 and variance 1 (the groups of group norm are strided over the channels, as in
Poplibs), for 2D to 5D inputs with the channels first or last, axes given as positive
or negative numbers; layer norm equals Keras's LayerNormalization and takes its
weights; weights follow the layer's dtype and Keras's floatx; configs round-trip; layer
norm rejects an unknown shape. Each scenario name covers the three classes of the
original that share it.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from ipu_tensorflow_addons.keras import layers

RNG = np.random.default_rng(7)


def _call(layer_class, x, **kwargs):
    layer = layer_class(**kwargs)
    layer.build(x.shape)

    @tf.function
    def impl(x, training):
        return layer(inputs=x, training=training)

    return impl(x, True).numpy()


def _normalized(kind, input_shape, channels_axis, reduction_axes, groups=2):
    """The original's check: the output's groups have mean ~0 and variance ~1."""
    rank = len(input_shape)
    channels_axis %= rank
    reduced_axes = [channels_axis + 1] + [
        a % rank if a % rank < channels_axis else a % rank + 1 for a in reduction_axes
    ]
    channels = input_shape[channels_axis]
    inputs = RNG.random(input_shape).astype(np.float32) + 1.0
    before, after = input_shape[:channels_axis], input_shape[channels_axis + 1 :]
    if kind == "group":
        outputs = _call(
            layers.GroupNormalization,
            inputs,
            groups=groups,
            center=False,
            scale=False,
            channels_axis=channels_axis,
        )
        # Poplibs' groups are strided over the channels: make them contiguous.
        outputs = np.swapaxes(outputs, 0, channels_axis)
        group_size = channels // groups
        order = [(c % groups) * group_size + c // groups for c in range(channels)]
        reshuffled = np.empty_like(outputs)
        reshuffled[order] = outputs
        outputs = np.swapaxes(reshuffled, 0, channels_axis)
        shape = [*before, 1, channels, *after]
    elif kind == "instance":
        outputs = _call(
            layers.InstanceNormalization,
            inputs,
            center=False,
            scale=False,
            channels_axis=channels_axis,
        )
        shape = [*before, channels, 1, *after]
    else:
        axis = [channels_axis] + [a % rank for a in reduction_axes]
        outputs = _call(layers.LayerNormalization, inputs, center=False, scale=False, axis=axis)
        outputs = np.swapaxes(outputs, 0, channels_axis)
        shape = [*before, 1, channels, *after]
    assert not np.isnan(outputs).any()
    outputs = np.reshape(outputs, shape)
    reduced = tuple(reduced_axes)
    kept = [n for i, n in enumerate(shape) if i not in reduced]
    np.testing.assert_allclose(np.mean(outputs, axis=reduced), np.zeros(kept), atol=0.1, rtol=0.1)
    np.testing.assert_allclose(np.var(outputs, axis=reduced), np.ones(kept), atol=0.1, rtol=0.1)


KINDS = ["group", "layer", "instance"]


@pytest.mark.follows("testOutput4D_NHWC")
@pytest.mark.parametrize("kind", KINDS)
def test_output_4d_nhwc(kind):
    _normalized(kind, [10, 10, 10, 30], 3, [1, 2])
    _normalized(kind, [10, 10, 10, 30], -1, [-3, -2])


@pytest.mark.follows("testOutput3D_NHWC")
@pytest.mark.parametrize("kind", KINDS)
def test_output_3d_nhwc(kind):
    _normalized(kind, [10, 10, 30], 2, [0, 1])
    _normalized(kind, [10, 10, 30], -1, [-3, -2])


@pytest.mark.follows("testOutput4D_NCHW")
@pytest.mark.parametrize("kind", KINDS)
def test_output_4d_nchw(kind):
    _normalized(kind, [10, 10, 10, 30], 1, [2, 3])
    _normalized(kind, [10, 10, 10, 30], -3, [-2, -1])


@pytest.mark.follows("testOutput3D_NCHW")
@pytest.mark.parametrize("kind", KINDS)
def test_output_3d_nchw(kind):
    _normalized(kind, [10, 10, 30], 1, [0, 2])
    _normalized(kind, [10, 10, 30], -2, [-3, -1])


@pytest.mark.follows("testOutput2D_NC")
@pytest.mark.parametrize("kind", ["group", "layer"])
def test_output_2d_nc(kind):
    _normalized(kind, [10, 7 * 100], 1, [], groups=7)


@pytest.mark.follows("testOutput5D_NCXXX")
@pytest.mark.parametrize("kind", KINDS)
def test_output_5d_ncxxx(kind):
    _normalized(kind, [4, 4, 4, 10, 4], 1, [2, 3, 4])


def _compare_with_keras(input_shape, axis):
    inputs = RNG.random(input_shape).astype(np.float32) + 0.1
    ours = _call(layers.LayerNormalization, inputs, axis=axis)
    theirs = _call(keras.layers.LayerNormalization, inputs, axis=axis)
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-6)  # assertAllClose's atol


@pytest.mark.follows("test3D")
def test_3d():
    _compare_with_keras([10, 10, 30], [1, 2])
    _compare_with_keras([10, 10, 30], [-2, -1])


@pytest.mark.follows("test4D_single_axis")
def test_4d_single_axis():
    _compare_with_keras([10, 10, 30, 10], [2])
    _compare_with_keras([10, 10, 30, 10], [-1])


def _copied_weights(input_shape, axis):
    ours = layers.LayerNormalization(axis=axis)
    theirs = keras.layers.LayerNormalization(axis=axis)
    ours.build(input_shape)
    theirs.build(input_shape)
    ours.set_weights(theirs.get_weights())
    np.testing.assert_array_equal(ours.beta, theirs.beta)
    np.testing.assert_array_equal(ours.gamma, theirs.gamma)


@pytest.mark.follows("testCopyWeightsFromUpstreamLayer")
def test_copy_weights_from_upstream_layer():
    _copied_weights((10, 10, 30), -1)


@pytest.mark.follows("testCopyWeightsFromUpstreamLayerMultiAxis")
def test_copy_weights_from_upstream_layer_multi_axis():
    _copied_weights((10, 10, 30), (1, -1))


LAYERS = [layers.GroupNormalization, layers.LayerNormalization, layers.InstanceNormalization]


@pytest.mark.follows("testDtype")
@pytest.mark.parametrize("layer_class", LAYERS)
def test_dtype(layer_class):
    def weight_dtypes(**kwargs):
        layer = layer_class(**kwargs)
        layer.build((1, 1, 1, 2))
        return {w.dtype for w in layer.weights}

    assert weight_dtypes() == {tf.float32}
    assert weight_dtypes(dtype=tf.float16) == {tf.float16}
    keras.backend.set_floatx("float16")
    try:
        assert weight_dtypes() == {tf.float16}
    finally:
        keras.backend.set_floatx("float32")


@pytest.mark.follows("testGetConfig")
@pytest.mark.parametrize("layer_class", LAYERS)
def test_get_config(layer_class):
    config = layer_class().get_config()
    assert layer_class.from_config(config).get_config() == config


@pytest.mark.follows("testUnknownShape")
def test_unknown_shape():
    with pytest.raises(ValueError, match="Input shape"):
        layers.LayerNormalization()(keras.Input((2, 2, 1)))
