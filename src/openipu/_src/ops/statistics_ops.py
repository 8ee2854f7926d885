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
    _check_values(inputs, "inputs", "histogram")
    _check_values(levels, "levels", "histogram")
    return _counts(inputs, levels, absolute_of_input)


def histogram_update(hist, inputs, levels, absolute_of_input: bool = False) -> tf.Tensor:
    """`hist` plus the histogram of `inputs` over `levels`."""
    hist = tf.convert_to_tensor(hist)
    inputs = tf.convert_to_tensor(inputs)
    levels = tf.convert_to_tensor(levels)
    _check_values(inputs, "inputs", "histogram_update")
    _check_values(levels, "levels", "histogram_update")
    if hist.dtype != tf.float32:
        raise ValueError(f"histogram_update: hist must be float32, got dtype {hist.dtype.name}")
    if hist.shape.rank != 1:
        raise ValueError(f"histogram_update: hist must have rank 1, got shape {hist.shape}")
    if not hist.shape.is_compatible_with([_bin_count(levels)]):
        raise ValueError(
            "histogram_update: hist must have len(levels) + 1 bins, got "
            f"{hist.shape[0]} bins for {levels.shape[0]} levels"
        )
    return hist + _counts(inputs, levels, absolute_of_input)


def _bin_count(levels: tf.Tensor) -> int | None:
    return None if levels.shape[0] is None else levels.shape[0] + 1


def _check_values(values: tf.Tensor, label: str, what: str) -> None:
    if values.dtype not in _VALUE_DTYPES:
        raise ValueError(
            f"{what}: {label} must be float16 or float32, got dtype {values.dtype.name}"
        )
    if values.shape.rank != 1:
        raise ValueError(f"{what}: {label} must have rank 1, got shape {values.shape}")


def _counts(inputs: tf.Tensor, levels: tf.Tensor, absolute_of_input: bool) -> tf.Tensor:
    values = tf.cast(inputs, tf.float32)
    if absolute_of_input:
        values = tf.abs(values)
    levels = tf.cast(levels, tf.float32)
    # The bin of a value is the number of levels at or below it.
    bins = tf.reduce_sum(tf.cast(values[:, None] >= levels[None, :], tf.int32), axis=1)
    ones = tf.ones_like(values)
    return tf.math.unsorted_segment_sum(ones, bins, tf.shape(levels)[0] + 1)
