"""Histogram statistics (`ipu.statistics_ops`).

A histogram over levels `l_0 < l_1 < ... < l_{n-1}` has n + 1 bins: bin 0
counts values below `l_0`, bin i values in `[l_{i-1}, l_i)`, the last bin
values at or above `l_{n-1}` (PopLibs' `histogram`). Counts are float32.
"""

from __future__ import annotations

import tensorflow as tf

_VALUE_DTYPES = (tf.float16, tf.float32)


def fixed_width_bins(inputs, n_bins: int) -> tf.Tensor:
    """`n_bins` evenly spaced levels from the smallest to the largest value of `inputs`.

    As the original (ops/statistics_ops.py), this is `linspace(min, max, n_bins)` with no
    checks of its own: inputs of any shape and floating type, n_bins an int or a tensor.
    """
    inputs = tf.convert_to_tensor(inputs)
    # float16 levels are spaced in float32 and rounded once (linspace has no float16 kernel).
    compute_dtype = tf.float32 if inputs.dtype == tf.float16 else inputs.dtype
    levels = tf.linspace(
        tf.cast(tf.reduce_min(inputs), compute_dtype),
        tf.cast(tf.reduce_max(inputs), compute_dtype),
        n_bins,
    )
    return tf.cast(levels, inputs.dtype)


def histogram(inputs, levels, absolute_of_input: bool = False) -> tf.Tensor:
    """Counts of `inputs` in the len(levels) + 1 bins the levels define."""
    inputs = tf.convert_to_tensor(inputs)
    levels = tf.convert_to_tensor(levels)
    # The original's checks, in its order and with its words (ops/statistics_ops.py).
    _check_dtypes({"inputs": inputs, "levels": levels}, "histogram computation")
    _check_ranks({"inputs": inputs, "levels": levels}, "histogram")
    return _counts(inputs, levels, absolute_of_input)


def histogram_update(hist, inputs, levels, absolute_of_input: bool = False) -> tf.Tensor:
    """`hist` plus the histogram of `inputs` over `levels`."""
    hist = tf.convert_to_tensor(hist)
    inputs = tf.convert_to_tensor(inputs)
    levels = tf.convert_to_tensor(levels)
    if hist.dtype != tf.float32:
        raise ValueError(f"hist must be of float32 type (got dtype {hist.dtype.name})")
    _check_dtypes({"inputs": inputs, "levels": levels}, "histogram update")
    _check_ranks({"hist": hist, "inputs": inputs, "levels": levels}, "histogram_update")
    if not hist.shape.is_compatible_with([_bin_count(levels)]):
        raise ValueError(
            "hist and levels shapes are incompatible. For n levels, hist must have n+1 "
            f"elements (got {hist.shape[0]} bins for {levels.shape[0]} levels)."
        )
    return hist + _counts(inputs, levels, absolute_of_input)


def _bin_count(levels: tf.Tensor) -> int | None:
    return None if levels.shape[0] is None else levels.shape[0] + 1


def _check_dtypes(values: dict[str, tf.Tensor], computation: str) -> None:
    for label, value in values.items():
        if value.dtype not in _VALUE_DTYPES:
            raise ValueError(
                f"Only float16 and float32 types are supported for {computation}. ({label} "
                f"must be float16 or float32, got dtype {value.dtype.name})"
            )


def _check_ranks(values: dict[str, tf.Tensor], what: str) -> None:
    for label, value in values.items():
        if value.shape.rank != 1:
            raise ValueError(
                f"{what} expects rank-1 tensor inputs. ({label} must have rank 1, got shape "
                f"{value.shape})"
            )


def _counts(inputs: tf.Tensor, levels: tf.Tensor, absolute_of_input: bool) -> tf.Tensor:
    values = tf.cast(inputs, tf.float32)
    if absolute_of_input:
        values = tf.abs(values)
    levels = tf.cast(levels, tf.float32)
    # The bin of a value is the number of levels at or below it.
    bins = tf.reduce_sum(tf.cast(values[:, None] >= levels[None, :], tf.int32), axis=1)
    ones = tf.ones_like(values)
    return tf.math.unsorted_segment_sum(ones, bins, tf.shape(levels)[0] + 1)
