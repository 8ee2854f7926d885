"""statistics_ops against numpy binning (`searchsorted` on the levels)."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import statistics_ops

RNG = np.random.default_rng(5)


def numpy_histogram(values, levels, absolute=False):
    values = np.abs(values) if absolute else values
    bins = np.searchsorted(levels, values, side="right")  # number of levels <= value
    return np.bincount(bins, minlength=len(levels) + 1).astype(np.float32)


def test_fixed_width_bins_span_the_value_range():
    values = RNG.normal(size=100).astype(np.float32)
    got = statistics_ops.fixed_width_bins(values, 7)
    np.testing.assert_allclose(
        got, np.linspace(values.min(), values.max(), 7), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    "values, n_bins",
    [
        (RNG.normal(size=(4, 25)), 6),  # float64 of rank 2
        (RNG.normal(size=50).astype(np.float16), np.int64(4)),
        (RNG.normal(size=50).astype(np.float32), tf.constant(3)),
    ],
)
def test_fixed_width_bins_take_what_linspace_takes(values, n_bins):
    # The original is linspace(min, max, n_bins) with no checks of its own.
    got = statistics_ops.fixed_width_bins(values, n_bins)
    assert got.dtype == values.dtype
    expected = np.linspace(values.min(), values.max(), int(n_bins))
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("absolute", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_histogram_matches_numpy(absolute, dtype):
    values = RNG.normal(size=500).astype(dtype)
    levels = np.array([-1.0, -0.25, 0.0, 0.5, 1.5], dtype)
    expected = numpy_histogram(values, levels, absolute)
    got = statistics_ops.histogram(values, levels, absolute_of_input=absolute)
    assert got.dtype == tf.float32
    np.testing.assert_array_equal(got, expected)
    jitted = tf.function(
        lambda v, lv: statistics_ops.histogram(v, lv, absolute_of_input=absolute), jit_compile=True
    )(values, levels)
    np.testing.assert_array_equal(jitted, expected)


def test_values_on_a_level_go_to_the_bin_above():
    got = statistics_ops.histogram([0.0, 1.0, 2.0, 2.5], [1.0, 2.0])
    np.testing.assert_array_equal(got, [1, 1, 2])


def test_histogram_update_adds_to_the_histogram():
    levels = statistics_ops.fixed_width_bins(np.array([-2.0, 2.0], np.float32), 5)
    first, second = RNG.normal(size=50).astype(np.float32), RNG.normal(size=70).astype(np.float32)
    hist = statistics_ops.histogram(first, levels)
    hist = statistics_ops.histogram_update(hist, second, levels)
    expected = numpy_histogram(np.concatenate([first, second]), levels.numpy())
    np.testing.assert_array_equal(hist, expected)


@pytest.mark.parametrize(
    "inputs, levels, message",
    [
        (
            np.zeros(3, np.int32),
            np.zeros(2, np.float32),
            "inputs must be float16 or float32, got dtype int32",
        ),
        (
            np.zeros((3, 1), np.float32),
            np.zeros(2, np.float32),
            r"inputs must have rank 1, got shape \(3, 1\)",
        ),
        (
            np.zeros(3, np.float32),
            np.zeros(2, np.float64),
            "levels must be float16 or float32, got dtype float64",
        ),
    ],
)
def test_histogram_rejects_bad_inputs(inputs, levels, message):  # E61
    with pytest.raises(ValueError, match=message):
        statistics_ops.histogram(inputs, levels)


@pytest.mark.parametrize(
    "hist, message",
    [
        (np.zeros(4, np.float16), "hist must be of float32 type \\(got dtype float16\\)"),
        (np.zeros((4, 1), np.float32), r"hist must have rank 1, got shape \(4, 1\)"),
        (np.zeros(3, np.float32), "got 3 bins for 3 levels"),
    ],
)
def test_histogram_update_rejects_a_bad_histogram(hist, message):  # E62
    with pytest.raises(ValueError, match=message):
        statistics_ops.histogram_update(hist, np.zeros(2, np.float32), np.zeros(3, np.float32))


def test_bins_and_update_under_xla_match_eager():
    values = RNG.normal(size=40).astype(np.float32)
    hist = np.arange(6, dtype=np.float32)

    def binned(v, h):
        levels = statistics_ops.fixed_width_bins(v, 5)
        return levels, statistics_ops.histogram_update(h, v, levels, absolute_of_input=True)

    for ours, eager in zip(
        tf.function(binned, jit_compile=True)(values, hist), binned(values, hist), strict=True
    ):
        np.testing.assert_allclose(ours, eager, rtol=1e-6)
