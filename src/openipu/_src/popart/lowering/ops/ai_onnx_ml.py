"""The ai.onnx.ml domain (PopART exposes version 1): the tensor-only ops and LabelEncoder."""

from __future__ import annotations

from typing import Any

import numpy as np
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


@register_op("LabelEncoder", since=(2, 4), domain=ONNX_ML_DOMAIN)
class LabelEncoder(Op):
    """Maps each key to its value (keys_*/values_* lists, or keys_tensor/values_tensor from
    version 4), anything else to the default. String keys or values run outside XLA."""

    def setup(self) -> None:
        attrs = self.attrs
        keys = self._first("keys_tensor", "keys_strings", "keys_int64s", "keys_floats")
        values = self._first("values_tensor", "values_strings", "values_int64s", "values_floats")
        if keys is None or values is None or len(keys) != len(values):
            self.bad_attribute("keys_*", "and values_* must be given, as many values as keys")
        self.keys, self.values = np.asarray(keys), np.asarray(values)
        if attrs.get("default_tensor") is not None:
            default = np.asarray(attrs.default_tensor).reshape(-1)[0]
        elif self.values.dtype.kind in "OSU":
            default = attrs.default_string
        elif self.values.dtype.kind == "f":
            default = attrs.default_float
        else:
            default = attrs.default_int64
        self.default = default
        self.compilable = self.keys.dtype.kind not in "OSU" and self.values.dtype.kind not in "OSU"

    def _first(self, *names: str) -> Any:
        for name in names:
            value = self.attrs.get(name)
            if value is not None and len(np.asarray(value).reshape(-1)):
                return np.asarray(value).reshape(-1)
        return None

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        strings = self.keys.dtype.kind in "OSU"
        keys = tf.constant(self.keys.astype(object) if strings else self.keys)
        keys = keys if strings else tf.cast(keys, x.dtype)
        matches = tf.equal(x[..., None], keys)  # [..., keys]
        found = tf.reduce_any(matches, axis=-1)
        index = tf.argmax(tf.cast(matches, tf.int32), axis=-1)
        value_strings = self.values.dtype.kind in "OSU"
        values = tf.constant(self.values.astype(object) if value_strings else self.values)
        default = tf.constant(self.default, values.dtype)
        return tf.where(found, tf.gather(values, index), default)
