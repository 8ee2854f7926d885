"""The ai.onnx.ml domain (PopART exposes version 1): the tensor-only ops so far."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import ONNX_ML_DOMAIN, register_op


@register_op("Binarizer", since=1, domain=ONNX_ML_DOMAIN)
class Binarizer(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        threshold = tf.cast(self.attrs.threshold, x.dtype)
        return tf.cast(x > threshold, x.dtype)


@register_op("ArrayFeatureExtractor", since=1, domain=ONNX_ML_DOMAIN)
class ArrayFeatureExtractor(Op):
    """Selects ``indices`` along the last axis (a 1-D input becomes [1, len(indices)])."""

    def compute(self, x: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
        selected = tf.gather(x, tf.reshape(tf.cast(indices, tf.int64), [-1]), axis=-1)
        return tf.reshape(selected, [1, -1]) if x.shape.rank == 1 else selected
