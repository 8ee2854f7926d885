"""math_ops: segment_sum against the spec's example and numpy; serialized_matmul against matmul."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import math_ops

RNG = np.random.default_rng(3)


def _jit(fn):
    return tf.function(fn, jit_compile=True)


def numpy_segment_sum(data, segment_ids, num_segments):
    out = np.zeros((num_segments,) + data.shape[1:], data.dtype)
    for row, segment in zip(data, segment_ids, strict=True):
        out[segment] += row
    return out


def test_segment_sum_spec_example():
    c = tf.constant([[1, 2, 3, 4], [4, 3, 2, 1], [5, 6, 7, 8]])
    got = math_ops.segment_sum(c, tf.constant([0, 0, 1]), 2)
    np.testing.assert_array_equal(got, [[5, 5, 5, 5], [5, 6, 7, 8]])


@pytest.mark.parametrize("shape", [(7,), (7, 3), (7, 2, 4)])
def test_segment_sum_matches_numpy_with_empty_segments(shape):
    data = RNG.normal(size=shape).astype(np.float32)
    segment_ids = np.array([0, 0, 2, 2, 2, 5, 5], np.int32)  # segments 1, 3, 4 and 6 are empty
    expected = numpy_segment_sum(data, segment_ids, 7)
    np.testing.assert_allclose(math_ops.segment_sum(data, segment_ids, 7), expected, rtol=1e-6)
    jitted = _jit(lambda d: math_ops.segment_sum(d, segment_ids, 7))(data)
    np.testing.assert_allclose(jitted, expected, rtol=1e-6)


def test_segment_sum_gradient_gathers_the_upstream_gradient():
    data = tf.constant(RNG.normal(size=(5, 3)).astype(np.float32))
    segment_ids = tf.constant([0, 1, 1, 3, 3])
    upstream = tf.constant(RNG.normal(size=(4, 3)).astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(data)
        loss = tf.reduce_sum(math_ops.segment_sum(data, segment_ids, 4) * upstream)
    np.testing.assert_allclose(tape.gradient(loss, data), tf.gather(upstream, segment_ids))


def test_segment_sum_agrees_with_tf_segment_sum():
    data = RNG.normal(size=(6, 2)).astype(np.float32)
    segment_ids = [0, 1, 1, 2, 2, 2]
    np.testing.assert_allclose(
        math_ops.segment_sum(data, segment_ids, 3), tf.math.segment_sum(data, segment_ids)
    )


# The original's messages (tensorflow/python/ipu/ops/math_ops.py segment_sum).
def test_segment_sum_rejects_an_undefined_rank():  # E44
    traced = tf.function(
        lambda d: math_ops.segment_sum(d, [0, 1], 2),
        input_signature=[tf.TensorSpec(None, tf.float32)],
    )
    with pytest.raises(ValueError, match="Shape of data must be fully defined"):
        traced.get_concrete_function()


def test_segment_sum_rejects_mismatched_lengths():  # E45
    with pytest.raises(
        ValueError,
        match=r"segment_ids \(shape \(2,\)\) must have same length as axis 0 of data \(shape \(3, 4\)\)",
    ):
        math_ops.segment_sum(tf.zeros([3, 4]), [0, 1], 2)


def test_segment_sum_rejects_scalar_data():  # E46
    with pytest.raises(ValueError, match=r"Shape \(\) must have rank at least 1"):
        math_ops.segment_sum(tf.constant(1.0), [0], 1)


def test_segment_sum_rejects_segment_ids_of_rank_2():  # E47
    with pytest.raises(ValueError, match=r"Shape \(3, 1\) must have rank 1"):
        math_ops.segment_sum(tf.zeros([3, 4]), [[0], [0], [1]], 2)


# --- serialized_matmul --------------------------------------------------------------------------


@pytest.mark.parametrize("dimension", ["a_columns", "a_rows_b_columns", "b_rows"])
@pytest.mark.parametrize(
    "transpose_a, transpose_b", [(False, False), (True, False), (False, True), (True, True)]
)
def test_serialized_matmul_matches_matmul(dimension, transpose_a, transpose_b):
    m, k, n = 6, 8, 4
    a = RNG.normal(size=(2, k, m) if transpose_a else (2, m, k)).astype(np.float32)
    b = RNG.normal(size=(2, n, k) if transpose_b else (2, k, n)).astype(np.float32)
    a_matrix = np.swapaxes(a, -1, -2) if transpose_a else a
    b_matrix = np.swapaxes(b, -1, -2) if transpose_b else b
    expected = a_matrix @ b_matrix

    def product(x, y):
        return math_ops.serialized_matmul(x, y, 2, dimension, transpose_a, transpose_b)

    np.testing.assert_allclose(product(a, b), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_jit(product)(a, b), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dimension", ["a_columns", "a_rows_b_columns", "b_rows"])
def test_serialized_matmul_gradients_match_matmul(dimension):
    a = tf.constant(RNG.normal(size=(4, 6)).astype(np.float32))
    b = tf.constant(RNG.normal(size=(6, 2)).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([a, b])
        ours = tf.reduce_sum(tf.sin(math_ops.serialized_matmul(a, b, 2, dimension)))
        reference = tf.reduce_sum(tf.sin(tf.matmul(a, b)))
    for got, want in zip(
        tape.gradient(ours, [a, b]), tape.gradient(reference, [a, b]), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_serialized_matmul_on_integers():
    a = RNG.integers(-5, 5, size=(4, 6)).astype(np.int32)
    b = RNG.integers(-5, 5, size=(6, 3)).astype(np.int32)
    np.testing.assert_array_equal(math_ops.serialized_matmul(a, b, 3, "a_rows_b_columns"), a @ b)


@pytest.mark.parametrize("factor", [2.0, np.int32(2), "2"])
def test_serialized_matmul_factor_is_converted_with_int(factor):
    # The original takes int(serialization_factor).
    a = RNG.normal(size=(4, 6)).astype(np.float32)
    b = RNG.normal(size=(6, 2)).astype(np.float32)
    got = math_ops.serialized_matmul(a, b, factor, "a_rows_b_columns")
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-6)


def test_serialized_matmul_factor_must_divide_the_dimension():  # E48
    with pytest.raises(
        ValueError,
        match=r"Expected 'serialization_factor' \(4\) to divide the columns dimension of 'a' \(6\)",
    ):
        math_ops.serialized_matmul(tf.zeros([6, 2]), tf.zeros([2, 3]), 4, "a_columns")


def test_serialized_matmul_dimension_must_be_known_name():  # E48
    with pytest.raises(ValueError, match="Invalid serialization_dimension=k, expected one of"):
        math_ops.serialized_matmul(tf.zeros([2, 2]), tf.zeros([2, 2]), 1, "k")


def test_serialized_matmul_needs_rank_2_and_matching_inner_dimensions():
    with pytest.raises(ValueError, match="Expected tensor 'a' to have a minimum rank of 2"):
        math_ops.serialized_matmul(tf.zeros([3]), tf.zeros([3, 2]), 1, "b_rows")
    with pytest.raises(ValueError, match=r"Expected the number of columns in 'a' \(4\)"):
        math_ops.serialized_matmul(tf.zeros([3, 4]), tf.zeros([3, 2]), 1, "b_rows")
