"""image_ops.normalise_image against numpy."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import image_ops

RNG = np.random.default_rng(9)
OFFSETS = np.array([0.485, 0.456, 0.406], np.float32)
SCALES = np.array([1 / 0.229, 1 / 0.224, 1 / 0.225], np.float32)


def numpy_normalise(image, scale):
    normalised = (image.astype(np.float64) * scale - OFFSETS) * SCALES
    return np.concatenate([normalised, np.zeros(image.shape[:-1] + (1,))], axis=-1)


@pytest.mark.parametrize(
    "dtype, out_dtype, tolerance",
    [(np.float32, tf.float32, 1e-5), (np.float16, tf.float16, 2e-3), (np.uint8, tf.float16, 2e-3)],
)
def test_normalise_image_matches_numpy(dtype, out_dtype, tolerance):
    if dtype == np.uint8:
        image, scale = RNG.integers(0, 256, size=(2, 5, 4, 3)).astype(np.uint8), 1 / 255
    else:
        image, scale = RNG.uniform(0, 1, size=(2, 5, 4, 3)).astype(dtype), 1
    got = image_ops.normalise_image(image, OFFSETS, SCALES, scale=scale)
    assert got.dtype == out_dtype and got.shape == (2, 5, 4, 4)
    expected = numpy_normalise(image, scale)
    np.testing.assert_allclose(
        got.numpy().astype(np.float64), expected, rtol=tolerance, atol=tolerance
    )
    jitted = tf.function(
        lambda x: image_ops.normalise_image(x, OFFSETS, SCALES, scale=scale), jit_compile=True
    )(image)
    np.testing.assert_array_equal(jitted, got)


def test_the_padding_channel_is_zero():
    got = image_ops.normalise_image(
        np.ones((1, 2, 2, 3), np.float32), [1, 2, 3], [4, 5, 6], scale=2
    )
    np.testing.assert_array_equal(got[..., 3], 0)
    np.testing.assert_allclose(got[0, 0, 0], [4, 0, -6, 0])


def test_rejects_images_without_three_channels():
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"^The image has 4 channels, expected 3.*\(2, 2, 4\)"
    ):
        image_ops.normalise_image(tf.zeros([2, 2, 4]), OFFSETS, SCALES)


def test_rejects_unsupported_dtypes():
    with pytest.raises(TypeError, match=r"^The input `image` to `normalise_image` must be .*int32"):
        image_ops.normalise_image(tf.zeros([2, 2, 3], tf.int32), OFFSETS, SCALES)
