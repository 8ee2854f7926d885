"""Tensors made from attributes or shapes: Constant, ConstantOfShape, Range, EyeLike."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.dtypes import ONNX_TO_TF
from openipu._src.popart.lowering.op import Op, static_value
from openipu._src.popart.lowering.registry import register_op

_CONSTANT_ATTRIBUTES = (
    "value",
    "sparse_value",
    "value_float",
    "value_floats",
    "value_int",
    "value_ints",
    "value_string",
    "value_strings",
)


def as_constant(array: np.ndarray) -> tf.Tensor:
    if array.dtype == object or array.dtype.kind in "SU":
        return tf.constant(np.vectorize(_to_bytes, otypes=[object])(array), dtype=tf.string)
    return tf.constant(array)


def _to_bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


@register_op("Constant", since=(1, 9, 11, 12, 13, 19, 21, 23, 24, 25))
class Constant(Op):
    def setup(self) -> None:
        given = [
            name
            for name in _CONSTANT_ATTRIBUTES
            if any(attribute.name == name for attribute in self.node.attribute)
        ]
        if len(given) != 1:
            self.bad_attribute(
                "value",
                f"exactly one of {', '.join(_CONSTANT_ATTRIBUTES)} must be set, got {given}",
            )
        name = given[0]
        value = self.attrs[name]
        if name in ("value_float", "value_floats"):
            value = np.asarray(value, dtype=np.float32)
        elif name in ("value_int", "value_ints"):
            value = np.asarray(value, dtype=np.int64)
        elif name in ("value_string", "value_strings"):
            value = np.asarray(value, dtype=object)
        self.value = np.asarray(value) if not isinstance(value, np.ndarray) else value

    def compute(self) -> tf.Tensor:
        return as_constant(self.value)


@register_op("ConstantOfShape", since=(9, 20, 21, 23, 24, 25))
class ConstantOfShape(Op):
    def compute(self, shape: tf.Tensor) -> tf.Tensor:
        value = self.attrs.value
        fill = np.zeros([1], np.float32) if value is None else np.asarray(value).reshape(-1)
        static_shape = static_value(shape)
        target = static_shape.tolist() if static_shape is not None else tf.cast(shape, tf.int64)
        return tf.fill(target, as_constant(fill[0]))


@register_op("Range", since=(11, 27))
class Range(Op):
    def compute(self, start: tf.Tensor, limit: tf.Tensor, delta: tf.Tensor) -> tf.Tensor:
        dtype = start.dtype
        # Opset 27's stash_type 1 (its default) counts half-precision ranges in float32.
        if self.opset_version >= 27 and self.attrs.get("stash_type") == 1 and dtype in _HALVES:
            start, limit, delta = (tf.cast(item, tf.float32) for item in (start, limit, delta))
        values = [static_value(item) for item in (start, limit, delta)]
        if all(value is not None for value in values):
            # Static bounds give a static output length, which XLA needs.
            begin, end, step = (np.asarray(value).reshape(()) for value in values)
            count = max(int(np.ceil((end - begin) / step)), 0)
            counted = begin + np.arange(count, dtype=begin.dtype) * step
            return tf.cast(tf.constant(counted, dtype=start.dtype), dtype)
        return tf.cast(tf.range(start, limit, delta, dtype=start.dtype), dtype)


_HALVES = (tf.float16, tf.bfloat16)


@register_op("EyeLike", since=(9, 22))
class EyeLike(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        dtype = ONNX_TO_TF[self.attrs.dtype] if self.attrs.get("dtype") is not None else x.dtype
        rows, columns = tf.shape(x)[0], tf.shape(x)[1]
        offset = self.attrs.k
        row_index = tf.range(rows)[:, tf.newaxis]
        column_index = tf.range(columns)[tf.newaxis, :]
        return tf.cast(column_index - row_index == offset, dtype)
