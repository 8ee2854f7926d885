"""Checks of the options every Popnn recurrent layer takes (dtypes, memory proportions, units).

`partials_dtype` and the available memory proportions only steer how Popnn
computes on the chip: they are checked and kept. The host computes in
float32 when the partials are float32 (half-precision inputs included),
which is what float32 partials mean for the accumulations.
"""

from __future__ import annotations

import numbers

import numpy as np
import tensorflow as tf

from openipu._src.int_like import plain_int

SUPPORTED_DTYPES = (tf.float16, tf.float32)


def checked_units(owner: str, parameter: str, value) -> int:
    value = plain_int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{owner}: {parameter} must be a positive int, got {value!r}")
    return int(value)


def checked_float_dtype(owner: str, parameter: str, value) -> tf.DType:
    """`value` as a tf.DType, which must be float16 or float32."""
    try:
        dtype = tf.as_dtype(value)
    except TypeError:
        dtype = None
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"{owner}: {parameter} must be float16 or float32, got {value!r}")
    return dtype


def checked_partials_dtype(owner: str, value) -> tf.DType:
    """`partials_dtype` as a tf.DType, float16 or float32. The original hands it to its Popnn
    op's type attribute ({float16, float32}), which TensorFlow refuses with a TypeError."""
    try:
        return checked_float_dtype(owner, "partials_dtype", value)
    except ValueError as error:
        raise TypeError(str(error)) from None


def checked_memory_proportion(owner: str, parameter: str, value) -> float | None:
    """None or -1 (Popnn's default), otherwise a fraction in [0, 1]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"{owner}: {parameter} must be None, -1 or a float in [0, 1], got {value!r}"
        )
    value = float(value)
    if value == -1.0:
        return None
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{owner}: {parameter} must be None, -1 or a float in [0, 1], got {value!r}"
        )
    return value


def checked_memory_proportions(owner: str, forward, backward) -> tuple[float | None, float | None]:
    """The forward and backward proportions; Popnn applies an unset backward one the forward's."""
    forward = checked_memory_proportion(owner, "available_memory_proportion_fwd", forward)
    if backward is None:
        return forward, forward
    return forward, checked_memory_proportion(owner, "available_memory_proportion_bwd", backward)


def compute_dtype(data_dtype: tf.DType, partials_dtype: tf.DType) -> tf.DType:
    """The dtype the host computes in: float32 partials accumulate half-precision data in float32."""
    return tf.float32 if partials_dtype == tf.float32 else data_dtype


def dtype_name(dtype: tf.DType) -> str:
    return tf.as_dtype(dtype).name
