"""Keras layers converting to and from FP8 (`ipu_tensorflow_addons.keras.layers.ConvertToF8`,
`ConvertFromF8`; ipu_tensorflow_addons/keras/layers/f8_convert.py)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.ops.f8_ops import QuarterTensor, convert_from_f8, convert_to_f8


class ConvertToF8(tf_keras.layers.Layer):
    """`convert_to_f8(data, metadata)` as a layer; returns `[data, metadata]` (uint8)."""

    def call(self, data, metadata, **kwargs):
        del kwargs
        output = convert_to_f8(data, metadata)
        return [output.data, output.metadata]


class ConvertFromF8(tf_keras.layers.Layer):
    """The values of `[data, metadata]` as `dtype` (through float16, as the original)."""

    def __init__(self, dtype=tf.half, **kwargs) -> None:
        super().__init__(dtype=dtype, **kwargs)

    def call(self, inputs, **kwargs):
        del kwargs
        return convert_from_f8(QuarterTensor(*inputs), dtype=self.dtype)
