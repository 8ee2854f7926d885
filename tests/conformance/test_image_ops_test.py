"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/image_ops_test.py`.

`ipu.ops.image_ops.normalise_image` in a loop between an infeed and an outfeed: images of
3 channels (any leading shape) cast, scaled, offset and scaled per channel, then padded to
4 channels, in float32, float16 and uint8, with scales and offsets of another type or given
as tensors; images of 2 channels and scales or offsets of the wrong size are refused (the
original's messages). References from numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu

v1 = tf.compat.v1

NUM_IMAGES = 3


def _make_graph(offsets, scales, scale, im_type, im_shape):
    dataset = tu.create_single_increasing_dataset(NUM_IMAGES, shape=im_shape, dtype=np.float32)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(image):
        if im_type:
            image = tf.cast(image, im_type)
        return outfeed.enqueue(ipu.ops.image_ops.normalise_image(image, offsets, scales, scale))

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(NUM_IMAGES, body, [], infeed))
    return run, infeed, outfeed


def _test_case(sess, offsets, scales, scale=1, im_type=None, im_shape=None,
               tensor_scales_offsets=False):  # fmt: skip
    im_shape = im_shape or [2, 2, 2, 3]
    offsets_t, scales_t = offsets, scales
    if tensor_scales_offsets:
        offsets_t, scales_t = tf.constant(offsets), tf.constant(scales)
    run, infeed, outfeed = _make_graph(offsets_t, scales_t, scale, im_type, im_shape)
    sess.run(infeed.initializer)
    sess.run(run)
    results = sess.run(outfeed.dequeue())
    # Image n is all n; cast, scaled, offset and scaled per channel, padded to 4 channels.
    expected = (np.ones([1, *im_shape]).T * np.arange(NUM_IMAGES)).T
    expected = ((expected.astype(im_type) * scale) - offsets) * scales
    padding = np.zeros([NUM_IMAGES, *im_shape[:-1], 4 - im_shape[-1]])
    np.testing.assert_allclose(results, np.concatenate([expected, padding], -1), rtol=1e-3)


@pytest.mark.follows("testNormaliseImage")
def test_normalise_image(tf1_graph):
    config = ipu.config.IPUConfig()
    config.ipu_model.compile_ipu_code = False
    config.configure_ipu_system()
    f32 = np.float32
    try:
        with v1.Session() as sess:
            _test_case(sess, np.array([1, 2, 3], f32), np.array([4, 5, 6], f32), scale=2)
            # A strange but valid shape.
            _test_case(sess, np.array([1, 2, 3], f32), np.array([4, 5, 6], f32),
                       im_shape=[2, 1, 2, 9, 3])  # fmt: skip
            with pytest.raises(
                tf.errors.InvalidArgumentError, match="The image has 2 channels, expected 3."
            ):
                _test_case(sess, np.array([1, 2, 3], f32), np.array([4, 5, 6], f32),
                           im_shape=[2, 2])  # fmt: skip
            for offsets, scales in (([1, 2], [4, 5, 6]), ([1, 2, 3], [4, 5, 6, 7])):
                with pytest.raises(
                    tf.errors.InvalidArgumentError,
                    match="must be the same size as the number of image channels 3, but was",
                ):
                    _test_case(sess, np.array(offsets, f32), np.array(scales, f32))
            # Precise and negative values.
            _test_case(sess, np.array([3.82, -1.9999, 6000], f32),
                       np.array([-1, 1.5, 6.3333], f32), scale=-3.283)  # fmt: skip
            f16 = np.float16
            _test_case(sess, np.array([1, 2, 3], f16), np.array([4, 5, 6], f16), 2, f16)
            _test_case(sess, np.array([1, 2, 3], f16), np.array([4, 5, 6], f16), 2, np.uint8)
            # Scales and offsets of another type than the image's.
            _test_case(sess, np.array([1, 2, 3], f16), np.array([4, 5, 6], f16), 2, f32)
            _test_case(sess, np.array([1, 2, 3], f32), np.array([4, 5, 6], f32), 2, np.uint8)
            _test_case(sess, np.array([1, 2, 3], f32), np.array([4, 5, 6], f32), 2, np.uint8,
                       tensor_scales_offsets=True)  # fmt: skip
    finally:
        ipu.config.reset_ipu_configuration()
