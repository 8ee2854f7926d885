"""Small TensorFlow helpers shared by the op lowerings."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.dtypes import is_narrow


def normalize_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def normalize_axes(axes: Sequence[int], rank: int) -> list[int]:
    return [normalize_axis(int(axis), rank) for axis in axes]


def rank_of(x: tf.Tensor) -> int:
    if x.shape.rank is None:
        raise ValueError("the rank of the tensor must be known when tracing")
    return x.shape.rank


def shape_list(x: tf.Tensor) -> list[int | tf.Tensor]:
    """The shape with static dims as ints and unknown dims as scalar tensors."""
    static = x.shape.as_list()
    if all(dim is not None for dim in static):
        return static
    dynamic = tf.shape(x)
    return [dim if dim is not None else dynamic[index] for index, dim in enumerate(static)]


def shape_tensor(x: tf.Tensor) -> tf.Tensor:
    """The shape as an int64 tensor, a constant when the shape is static."""
    if x.shape.is_fully_defined():
        return tf.constant(x.shape.as_list(), dtype=tf.int64)
    return tf.shape(x, out_type=tf.int64)


# Integer types for which TensorFlow's CPU kernels of most math ops are missing.
_WIDENED = {
    tf.int8: tf.int32,
    tf.uint8: tf.int32,
    tf.int16: tf.int32,
    tf.uint16: tf.int32,
    tf.uint32: tf.int64,
    tf.uint64: tf.uint64,
}


def widened(fn: Callable[..., tf.Tensor], *tensors: tf.Tensor) -> tf.Tensor:
    """Apply ``fn`` in a wider integer type TensorFlow has kernels for, then cast back."""
    dtype = tensors[0].dtype
    wide = _WIDENED.get(dtype)
    if wide is None or wide == dtype:
        return fn(*tensors)
    return tf.cast(fn(*(tf.cast(tensor, wide) for tensor in tensors)), dtype)


def to_numpy_function(
    fn: Callable[..., np.ndarray | Sequence[np.ndarray]],
    inputs: Sequence[tf.Tensor],
    output_dtypes: Sequence[tf.DType],
) -> list[tf.Tensor]:
    """Run a numpy function on tensors (eagerly when possible, else through tf.numpy_function)."""
    if tf.executing_eagerly():
        returned = fn(*(tensor.numpy() for tensor in inputs))
        results = returned if isinstance(returned, tuple | list) else [returned]
        return [
            tf.constant(np.asarray(result), dtype=dtype)
            for result, dtype in zip(results, output_dtypes, strict=True)
        ]
    results = tf.numpy_function(fn, list(inputs), list(output_dtypes), stateful=False)
    return list(results) if isinstance(results, list | tuple) else [results]


def cast(x: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """tf.cast that also converts to and from the narrow (float8, int4...) types through numpy."""
    dtype = tf.as_dtype(dtype)
    if x.dtype == dtype:
        return x
    if is_narrow(x.dtype) or is_narrow(dtype):
        numpy_dtype = dtype.as_numpy_dtype
        return to_numpy_function(
            lambda array: (
                np.asarray(array).astype(np.float32).astype(numpy_dtype)
                if array.dtype.kind not in "iub"
                else np.asarray(array).astype(numpy_dtype)
            ),
            [x],
            [dtype],
        )[0]
    return tf.cast(x, dtype)
