"""Indexing: Gather*, Scatter*, OneHot, Compress, NonZero, TopK, Unique."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import normalize_axis, to_numpy_function


def wrap_negative(indices: tf.Tensor, length: tf.Tensor | int) -> tf.Tensor:
    """ONNX allows negative indices counting from the end; TensorFlow does not."""
    indices = tf.cast(indices, tf.int64)
    return tf.where(indices < 0, indices + tf.cast(length, tf.int64), indices)


@register_op("Gather", since=(1, 11, 13))
class Gather(Op):
    def compute(self, data: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
        axis = normalize_axis(self.attrs.axis, data.shape.rank)
        indices = wrap_negative(indices, tf.shape(data, out_type=tf.int64)[axis])
        return tf.gather(data, indices, axis=axis)


def element_coordinates(indices: tf.Tensor, axis: int) -> tf.Tensor:
    """Full coordinates [..., rank] addressing ``indices``' values along ``axis``."""
    dims = tf.shape(indices, out_type=tf.int64)
    rank = indices.shape.rank
    grids = tf.meshgrid(*[tf.range(dims[index]) for index in range(rank)], indexing="ij")
    grids[axis] = tf.cast(indices, tf.int64)
    return tf.stack(grids, axis=-1)


@register_op("GatherElements", since=(11, 13))
class GatherElements(Op):
    def compute(self, data: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
        axis = normalize_axis(self.attrs.axis, data.shape.rank)
        indices = wrap_negative(indices, tf.shape(data, out_type=tf.int64)[axis])
        return tf.gather_nd(data, element_coordinates(indices, axis))


@register_op("GatherND", since=(11, 12, 13))
class GatherND(Op):
    def compute(self, data: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
        batch_dims = self.attrs.get("batch_dims") or 0
        depth = indices.shape[-1]
        dims = tf.shape(data, out_type=tf.int64)[batch_dims : batch_dims + depth]
        indices = wrap_negative(indices, dims)
        return tf.gather_nd(data, indices, batch_dims=batch_dims)


def scatter_reduce(
    data: tf.Tensor, coordinates: tf.Tensor, updates: tf.Tensor, reduction: str
) -> tf.Tensor:
    """Scatter ``updates`` [N] to ``coordinates`` [N, rank] of ``data``, combining by reduction."""
    if reduction == "none":
        return tf.tensor_scatter_nd_update(data, coordinates, updates)
    dims = tf.shape(data, out_type=tf.int64)
    size = tf.reduce_prod(dims)
    strides = tf.math.cumprod(dims, exclusive=True, reverse=True)
    linear = tf.reduce_sum(coordinates * strides, axis=-1)
    flat = tf.reshape(data, [-1])
    if reduction == "add":
        combined = flat + tf.math.unsorted_segment_sum(updates, linear, size)
    elif reduction == "mul":
        combined = flat * tf.math.unsorted_segment_prod(updates, linear, size)
    elif reduction == "max":
        combined = tf.maximum(flat, tf.math.unsorted_segment_max(updates, linear, size))
    elif reduction == "min":
        combined = tf.minimum(flat, tf.math.unsorted_segment_min(updates, linear, size))
    else:
        raise ValueError(f"unknown reduction {reduction!r}")
    return tf.reshape(combined, dims)


def check_reduction(op: Op) -> None:
    reduction = op.attrs.get("reduction") or "none"
    if reduction not in ("none", "add", "mul", "max", "min"):
        op.bad_attribute("reduction", f"must be none, add, mul, max or min, not {reduction!r}")


@register_op("ScatterElements", since=(11, 13, 16, 18))
@register_op("Scatter", since=(9, 11))
class ScatterElements(Op):
    def setup(self) -> None:
        check_reduction(self)

    def compute(self, data: tf.Tensor, indices: tf.Tensor, updates: tf.Tensor) -> tf.Tensor:
        axis = normalize_axis(self.attrs.axis, data.shape.rank)
        indices = wrap_negative(indices, tf.shape(data, out_type=tf.int64)[axis])
        coordinates = tf.reshape(element_coordinates(indices, axis), [-1, data.shape.rank])
        return scatter_reduce(
            data, coordinates, tf.reshape(updates, [-1]), self.attrs.get("reduction") or "none"
        )


@register_op("ScatterND", since=(11, 13, 16, 18))
class ScatterND(Op):
    def setup(self) -> None:
        check_reduction(self)

    def compute(self, data: tf.Tensor, indices: tf.Tensor, updates: tf.Tensor) -> tf.Tensor:
        reduction = self.attrs.get("reduction") or "none"
        indices = tf.cast(indices, tf.int64)
        if reduction == "none":
            return tf.tensor_scatter_nd_update(data, indices, updates)
        # Expand slice-addressing index tuples to one coordinate per updated element.
        rank = data.shape.rank
        depth = indices.shape[-1]
        trailing = tf.shape(data, out_type=tf.int64)[depth:]
        flat_indices = tf.reshape(indices, [-1, 1, depth])
        if depth < rank:
            grids = tf.meshgrid(
                *[tf.range(trailing[i]) for i in range(rank - depth)], indexing="ij"
            )
            inner = tf.reshape(tf.stack(grids, axis=-1), [1, -1, rank - depth])
            count = tf.shape(flat_indices)[0]
            coordinates = tf.concat(
                [
                    tf.broadcast_to(flat_indices, [count, tf.shape(inner)[1], depth]),
                    tf.broadcast_to(inner, [count, tf.shape(inner)[1], rank - depth]),
                ],
                axis=-1,
            )
        else:
            coordinates = flat_indices
        coordinates = tf.reshape(coordinates, [-1, rank])
        return scatter_reduce(data, coordinates, tf.reshape(updates, [-1]), reduction)


@register_op("OneHot", since=(9, 11))
class OneHot(Op):
    def compute(self, indices: tf.Tensor, depth: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
        depth = tf.cast(tf.reshape(depth, []), tf.int32)
        if indices.dtype.is_floating:
            indices = tf.cast(indices, tf.int64)
        indices = wrap_negative(indices, depth)
        axis = normalize_axis(self.attrs.axis, indices.shape.rank + 1)
        off_value, on_value = values[0], values[1]
        return tf.one_hot(indices, depth, on_value, off_value, axis=axis, dtype=values.dtype)


@register_op("Compress", since=(9, 11))
class Compress(Op):
    compilable = False  # the output shape depends on the condition's values

    def compute(self, x: tf.Tensor, condition: tf.Tensor) -> tf.Tensor:
        axis = self.attrs.get("axis")
        if axis is None:
            x = tf.reshape(x, [-1])
            axis = 0
        axis = normalize_axis(axis, x.shape.rank)
        length = tf.shape(x)[axis]
        condition = tf.cast(condition, tf.bool)[:length]
        padding = length - tf.shape(condition)[0]
        condition = tf.pad(condition, [[0, padding]], constant_values=False)
        return tf.boolean_mask(x, condition, axis=axis)


@register_op("NonZero", since=(9, 13))
class NonZero(Op):
    compilable = False  # the output shape depends on the values

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        if x.shape.rank == 0:
            x = tf.reshape(x, [1])
            return tf.zeros([0, tf.math.count_nonzero(x)], tf.int64)
        return tf.transpose(tf.where(tf.cast(x, tf.bool)))


@register_op("TopK", since=(1, 10, 11, 24))
class TopK(Op):
    def compute(self, x: tf.Tensor, k: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        rank = x.shape.rank
        axis = normalize_axis(self.attrs.axis, rank)
        count = self.attrs.k if k is None else self.static_ints(k, "K")[0]
        largest = self.attrs.get("largest", 1)
        if axis != rank - 1:
            permutation = list(range(rank))
            permutation[axis], permutation[-1] = permutation[-1], permutation[axis]
            x = tf.transpose(x, permutation)
        keys = x
        if keys.dtype.is_unsigned or keys.dtype in (tf.int8, tf.int16):
            keys = tf.cast(keys, tf.int64)
        if not largest:
            keys = -keys
        _, indices = tf.math.top_k(keys, k=count, sorted=True)
        values = tf.gather(x, indices, batch_dims=rank - 1)
        indices = tf.cast(indices, tf.int64)
        if axis != rank - 1:
            values = tf.transpose(values, permutation)
            indices = tf.transpose(indices, permutation)
        return values, indices


@register_op("Unique", since=11)
class Unique(Op):
    compilable = False  # data-dependent output shapes; computed with numpy

    def compute(self, x: tf.Tensor) -> tuple[tf.Tensor, ...]:
        axis, sort = self.attrs.get("axis"), self.attrs.sorted

        def unique(array: np.ndarray) -> tuple[np.ndarray, ...]:
            values, first, inverse, counts = np.unique(
                array, return_index=True, return_inverse=True, return_counts=True, axis=axis
            )
            if not sort:
                # Order of first occurrence instead of sorted order.
                order = np.argsort(first, kind="stable")
                rank = np.empty_like(order)
                rank[order] = np.arange(len(order))
                values = np.take(values, order, axis=0 if axis is None else axis)
                first, counts, inverse = first[order], counts[order], rank[inverse.reshape(-1)]
            return (
                values,
                first.astype(np.int64),
                inverse.reshape(-1).astype(np.int64),
                counts.astype(np.int64),
            )

        return tuple(to_numpy_function(unique, [x], [x.dtype, tf.int64, tf.int64, tf.int64]))
