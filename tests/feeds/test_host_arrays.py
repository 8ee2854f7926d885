"""Host arrays lent to programs: same values as a copy, no crash on any memory layout."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.engine import host_arrays

LARGE = (64, 1024)  # 256 KiB of float32: above the size from which arrays are lent


def offset_view(shape, dtype, offset_bytes: int) -> np.ndarray:
    """A C-contiguous array whose data starts `offset_bytes` past a 64-byte boundary."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(int(np.prod(shape)) * itemsize + 2 * host_arrays.ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % host_arrays.ALIGNMENT + offset_bytes
    view = raw[start : start + int(np.prod(shape)) * itemsize].view(dtype).reshape(shape)
    view[...] = np.arange(view.size).reshape(shape) % 251
    return view


def test_aligned_array_is_lent_without_a_copy():
    array = offset_view(LARGE, np.float32, 0)
    tensor = host_arrays.to_tensor(array, tf.float32)
    assert np.shares_memory(np.asarray(tensor), array)
    np.testing.assert_array_equal(tensor.numpy(), array)


@pytest.mark.parametrize("offset", [4, 16, 32])
def test_unaligned_array_is_copied_and_runs_in_xla_and_graphs(offset):
    # Lending an unaligned buffer aborts the process inside XLA (a failed CHECK).
    array = offset_view(LARGE, np.float32, offset)
    tensor = host_arrays.to_tensor(array, tf.float32)
    assert not np.shares_memory(np.asarray(tensor), array)
    expected = array.astype(np.float64).sum(axis=0)
    for jit in (True, False):
        total = tf.function(lambda t: tf.reduce_sum(t, axis=0), jit_compile=jit)(tensor)
        np.testing.assert_allclose(total.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize(
    "array",
    [
        np.asfortranarray(np.ones(LARGE, np.float32)),  # not C-contiguous
        np.ones((LARGE[0], 2 * LARGE[1]), np.float32)[:, ::2],  # strided view
        np.ones(LARGE, np.int32),
        np.ones(LARGE, bool),  # not lent: DLPack's bool support varies
        np.ones(3, np.float32),  # small: copied
    ],
    ids=["fortran", "strided", "int32", "bool", "small"],
)
def test_other_layouts_give_the_same_values(array):
    tensor = host_arrays.to_tensor(array, tf.as_dtype(array.dtype))
    np.testing.assert_array_equal(tensor.numpy(), array)
    assert tensor.shape == array.shape


def test_read_only_array():
    array = offset_view(LARGE, np.float32, 0)
    array.flags.writeable = False
    np.testing.assert_array_equal(host_arrays.to_tensor(array, tf.float32).numpy(), array)


def test_lent_input_is_not_written_by_a_program_that_could_reuse_its_buffer():
    array = offset_view(LARGE, np.float32, 0)
    before = array.copy()
    tensor = host_arrays.to_tensor(array, tf.float32)
    for jit in (True, False):
        # Element-wise ops may write into an input buffer that nothing else refers to.
        result = tf.function(lambda t: tf.nn.relu(t * 2.0 - 100.0), jit_compile=jit)(tensor)
        np.testing.assert_array_equal(result.numpy(), np.maximum(before * 2 - 100, 0))
    np.testing.assert_array_equal(array, before)
