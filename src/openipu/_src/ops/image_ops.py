"""Image operators (`ipu.image_ops`)."""

from __future__ import annotations

import tensorflow as tf

_IMAGE_DTYPES = (tf.uint8, tf.float16, tf.float32)


def normalise_image(image, channel_offsets, channel_scales, scale=1, name=None) -> tf.Tensor:
    """Pads 3 channels to 4 and normalises: `(image[c] * scale - offsets[c]) * scales[c]`.

    The padding channel is zero. uint8 images give float16 results; other
    images keep their dtype.
    """
    with tf.name_scope(name or "normalise_image"):
        image = tf.convert_to_tensor(image)
        if image.dtype not in _IMAGE_DTYPES:
            # The original's words (ops/image_ops.py).
            raise TypeError(
                "The input `image` to `normalise_image` must be either float16, float32 or "
                f"uint8. (got dtype {image.dtype.name})"
            )
        # The original's kernel refuses these with InvalidArgumentError and its words
        # (compiler/plugin/poplar/kernels/popops/normalise_image.cc); here when building.
        if image.shape.rank is None or image.shape.rank < 1 or image.shape[-1] != 3:
            channels = image.shape[-1] if image.shape.rank else None
            raise tf.errors.InvalidArgumentError(
                None,
                None,
                f"The image has {channels} channels, expected 3. (normalise_image: image must "
                f"have 3 channels innermost, got shape {image.shape})",
            )
        out_dtype = tf.float16 if image.dtype == tf.uint8 else image.dtype
        offsets = tf.convert_to_tensor(channel_offsets)
        scales = tf.convert_to_tensor(channel_scales)
        for label, vector in (("channel_offsets", offsets), ("channel_scales", scales)):
            if not vector.shape.is_compatible_with([3]):
                size = vector.shape[0] if vector.shape.rank else vector.shape
                raise tf.errors.InvalidArgumentError(
                    None,
                    None,
                    f"The {label} must be the same size as the number of image channels 3, but "
                    f"was {size} (normalise_image: {label} shape {vector.shape})",
                )
        # float32 arithmetic, one rounding to the output type at the end.
        normalised = (tf.cast(image, tf.float32) * tf.cast(scale, tf.float32)) - tf.cast(
            offsets, tf.float32
        )
        normalised *= tf.cast(scales, tf.float32)
        padding = [[0, 0]] * (image.shape.rank - 1) + [[0, 1]]
        return tf.cast(tf.pad(normalised, padding), out_dtype)
