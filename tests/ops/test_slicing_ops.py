"""slicing_ops against the spec's worked examples and a numpy loop."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import slicing_ops

RNG = np.random.default_rng(11)
ROWS = np.repeat(np.arange(6, dtype=np.float32)[:, None], 6, axis=1)  # row i is all i


def _rows(values):
    return np.repeat(np.asarray(values, np.float32)[:, None], 6, axis=1)


def numpy_sequence_slice(dst, src, num_elems, src_offsets, dst_offsets, zero_unused):
    out = np.zeros_like(dst) if zero_unused else dst.copy()
    for n, s, d in zip(num_elems, src_offsets, dst_offsets, strict=True):
        out[d : d + n] = src[s : s + n]
    return out


def test_sequence_slice_spec_example():
    dst = slicing_ops.sequence_slice(tf.zeros([6, 6]), ROWS, [2, 2], [2, 1], [0, 4], False)
    np.testing.assert_array_equal(dst, _rows([2, 3, 0, 0, 1, 2]))
    assert dst.dtype == tf.float32


def test_sequence_slice_pack_spec_example():
    src = _rows([2, 3, 1, 2])
    got = slicing_ops.sequence_slice_pack(tf.zeros([6, 6]), src, [2, 2], [2, 1], False)
    # The second slice (rows 1, 2 of the destination) overwrites the first one's row 2.
    np.testing.assert_array_equal(got, _rows([0, 1, 2, 3, 0, 0]))


def test_sequence_slice_unpack_spec_example():
    got = slicing_ops.sequence_slice_unpack(ROWS, [2, 2], [2, 1], 4)
    np.testing.assert_array_equal(got, _rows([2, 3, 1, 2]))


@pytest.mark.parametrize("zero_unused", [False, True])
def test_sequence_slice_matches_numpy(zero_unused):
    dst = RNG.normal(size=(10, 3, 2)).astype(np.float32)
    src = RNG.normal(size=(8, 3, 2)).astype(np.float32)
    args = ([3, 1, 2], [0, 7, 4], [1, 5, 8])
    expected = numpy_sequence_slice(dst, src, *args, zero_unused)
    np.testing.assert_array_equal(
        slicing_ops.sequence_slice(dst, src, *args, zero_unused), expected
    )
    jitted = tf.function(
        lambda d, s: slicing_ops.sequence_slice(d, s, *args, zero_unused), jit_compile=True
    )(dst, src)
    np.testing.assert_array_equal(jitted, expected)


def test_sequence_slice_takes_tensor_arguments_in_a_compiled_function():
    @tf.function(jit_compile=True)
    def unpack(src, num_elems, offsets):
        return slicing_ops.sequence_slice_unpack(src, num_elems, offsets, 5)

    got = unpack(ROWS, tf.constant([3, 2]), tf.constant([3, 0]))
    np.testing.assert_array_equal(got, _rows([3, 4, 5, 0, 1]))


def test_sequence_slice_gradients_route_to_the_copied_rows():
    dst = tf.constant(RNG.normal(size=(6, 2)).astype(np.float32))
    src = tf.constant(RNG.normal(size=(6, 2)).astype(np.float32))
    upstream = tf.constant(RNG.normal(size=(6, 2)).astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch([dst, src])
        out = slicing_ops.sequence_slice(dst, src, [2, 2], [2, 1], [0, 4], False)
        loss = tf.reduce_sum(out * upstream)
    dst_grad, src_grad = tape.gradient(loss, [dst, src])
    written = np.array([1, 1, 0, 0, 1, 1], bool)[:, None]
    np.testing.assert_allclose(dst_grad, np.where(written, 0, upstream))
    expected_src = np.zeros((6, 2), np.float32)
    for d, s in [(0, 2), (1, 3), (4, 1), (5, 2)]:
        expected_src[s] += upstream.numpy()[d]
    np.testing.assert_allclose(tf.convert_to_tensor(src_grad), expected_src, rtol=1e-6)


def test_inner_dimensions_must_match():
    with pytest.raises(
        ValueError,
        match=r"^src and dst inner shapes must match.*dst shape \(6, 6\), src shape \(6, 5\)",
    ):
        slicing_ops.sequence_slice(tf.zeros([6, 6]), tf.zeros([6, 5]), [1], [0], [0], False)


def test_rank_2_is_needed():
    with pytest.raises(ValueError, match=r"src must have rank >= 2, got shape \(6,\)"):
        slicing_ops.sequence_slice_unpack(tf.zeros([6]), [1], [0], 1)


def test_slice_vectors_need_at_least_one_slice():
    with pytest.raises(ValueError, match="num_elems, src_offsets and dst_offsets must have"):
        slicing_ops.sequence_slice(tf.zeros([6, 6]), tf.zeros([4, 6]), [], [], [], False)


def test_slice_vectors_must_have_one_entry_per_slice():
    with pytest.raises(
        ValueError,
        match=r"^num_elems and dst_offsets must have matching, nonzero shapes of rank 1.*\(2,\).*\(1,\)",
    ):
        slicing_ops.sequence_slice_pack(tf.zeros([6, 6]), tf.zeros([4, 6]), [2, 2], [1], False)


def test_sequence_slice_unpack_takes_a_numpy_int_total_as_the_original_attribute():
    # total_elements is an int attribute of the original's op: a count computed with
    # numpy (np.int64) is taken as TensorFlow's op_def_library takes it.
    lengths = np.array([2, 2])
    got = slicing_ops.sequence_slice_unpack(ROWS, lengths, [2, 1], np.sum(lengths))
    expected = np.concatenate([ROWS[2:4], ROWS[1:3]])
    np.testing.assert_array_equal(got.numpy(), expected)
    with pytest.raises(TypeError, match="total_elements must be an int"):
        slicing_ops.sequence_slice_unpack(ROWS, lengths, [2, 1], "4")
