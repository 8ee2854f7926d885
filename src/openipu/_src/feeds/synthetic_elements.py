"""Infeed elements made on the device when synthetic data replaces the host's.

With `--use_synthetic_data` (or `--synthetic_data_categories=infeed`) in `TF_POPLAR_FLAGS`
no data moves from the host: an infeed's dataset is never read, and the elements a
program receives have undefined content, or the content `--synthetic_data_initializer`
asks for (the original's docs/device_selection.rst and tools/data_initializer.cc):
"uniform" (uniform over the type's range), "normal" (mean 0, deviation 1 for floating
types, 1 for integers) or a number (its integer part). Undefined content is zeros here.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.util import nest

from openipu._src.config import poplar_flags


def synthetic_elements(element_spec, count: int | None):
    """`count` elements of `element_spec` stacked on a new first axis (one if None)."""
    initializer = poplar_flags.synthetic_data_initializer()

    def make(spec: tf.TensorSpec) -> tf.Tensor:
        shape = spec.shape.as_list() if count is None else [count, *spec.shape.as_list()]
        return _filled(shape, spec.dtype, initializer)

    with ops.device("/device:CPU:0"):
        return nest.map_structure(make, element_spec)


def _filled(shape: list[int], dtype: tf.DType, initializer: str | int | None) -> tf.Tensor:
    if initializer is None:
        return tf.zeros(shape, dtype)
    if isinstance(initializer, int):
        return tf.cast(tf.fill(shape, initializer), dtype)
    if dtype == tf.bool:
        return tf.random.uniform(shape, maxval=2, dtype=tf.int32) > 0
    if initializer == "normal":
        if dtype.is_floating:
            return tf.cast(tf.random.normal(shape), dtype)
        return tf.ones(shape, dtype)
    # "uniform": over the whole range of the type.
    if dtype.is_floating:
        unit = tf.random.uniform(shape, minval=-1.0, maxval=1.0, dtype=tf.float32)
        return tf.cast(unit * float(dtype.max), dtype)
    values = tf.random.uniform(shape, minval=int(dtype.min), maxval=int(dtype.max), dtype=tf.int64)
    return tf.cast(values, dtype)
