"""Host numpy arrays handed to a program without copying them.

`tf.constant(array)` copies the array into a buffer TensorFlow allocates: for a
step's stacked inputs (a few MB) that copy, and the page faults of the fresh
buffer, cost more than the copy itself (measured: 0.77 ms for 3.2 MB, where
`np.copy` takes 0.25 ms), up to a tenth of a PopART `session.run`. A DLPack
capsule instead lends TensorFlow the array's own memory (0.09 ms for any size).

TensorFlow's kernels assume 64-byte aligned buffers (Eigen's alignment with
AVX-512) and abort the process on one that is not (`Check failed: IsAligned()`),
so only aligned, contiguous arrays of a numeric dtype are lent; other large
arrays are first copied into an aligned array of our own, small ones go through
`tf.constant`. The lent memory is only read: a program's inputs are never
updated in place, because the caller's tensor keeps a second reference to the
buffer (TensorFlow only reuses an input buffer that nothing else refers to).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

# TensorFlow's `Allocator::kAllocatorAlignment`.
ALIGNMENT = 64
# Below this size, `tf.constant`'s copy costs less than making a DLPack capsule.
_LEND_FROM_BYTES = 64 * 1024
_LENDABLE_KINDS = frozenset("fiuc")


def to_tensor(array: np.ndarray, dtype: tf.DType) -> tf.Tensor:
    """`array` as an eager tensor of `dtype`, sharing its memory when that is safe."""
    if (
        array.nbytes < _LEND_FROM_BYTES
        or array.dtype.kind not in _LENDABLE_KINDS
        or array.dtype != dtype.as_numpy_dtype
        or not hasattr(array, "__dlpack__")
    ):
        return tf.constant(array, dtype)
    if not (array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0):
        array = aligned_copy(array)
    try:
        return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
    except (BufferError, TypeError, ValueError, tf.errors.OpError):
        # Read-only arrays (numpy < 2 cannot lend them), dtypes DLPack cannot describe.
        return tf.constant(array, dtype)


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `array` whose data starts on an `ALIGNMENT`-byte boundary."""
    raw = np.empty(array.nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    copy = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    np.copyto(copy, array)
    return copy
