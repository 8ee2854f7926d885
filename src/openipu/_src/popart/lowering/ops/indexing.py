"""Indexing: Gather*, Scatter*, OneHot, Compress, NonZero, TopK, Unique, TensorScatter.

Out-of-range indices (outside [-size, size)) are never clamped, which is what XLA's gather
would do silently. The original's Gather documents undefined data for them, or zeros with
`zero_OOR` (python/popxl/python_files/ops/gather.py, willow/src/popx/op/gatherx.cpp): the
gathers here give zeros. Its scatters update through poplibs' multiUpdate, which ignores
out-of-range indices: the scatters here drop those updates.
"""

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


def in_range_indices(indices: tf.Tensor, length: tf.Tensor | int) -> tuple[tf.Tensor, tf.Tensor]:
    """(indices wrapped, with out-of-range ones replaced by 0; a mask of the in-range ones)."""
    wrapped = wrap_negative(indices, length)
    in_range = (wrapped >= 0) & (wrapped < tf.cast(length, tf.int64))
    return tf.where(in_range, wrapped, tf.zeros_like(wrapped)), in_range


def zeros_where_out_of_range(values: tf.Tensor, in_range: tf.Tensor, axis: int) -> tf.Tensor:
    """`values` gathered along `axis` (where `in_range`'s dims are) with zeros where it is False."""
    trailing = values.shape.rank - axis - in_range.shape.rank
    ones = [tf.ones([count], tf.int32) for count in (axis, trailing)]
    mask = tf.reshape(in_range, tf.concat([ones[0], tf.shape(in_range), ones[1]], 0))
    return tf.where(mask, values, tf.zeros_like(values))


@register_op("Gather", since=(1, 11, 13))
class Gather(Op):
    def compute(self, data: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
        axis = normalize_axis(self.attrs.axis, data.shape.rank)
        indices, in_range = in_range_indices(indices, tf.shape(data, out_type=tf.int64)[axis])
        return zeros_where_out_of_range(tf.gather(data, indices, axis=axis), in_range, axis)


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
        indices, in_range = in_range_indices(indices, tf.shape(data, out_type=tf.int64)[axis])
        gathered = tf.gather_nd(data, element_coordinates(indices, axis))
        return tf.where(in_range, gathered, tf.zeros_like(gathered))


@register_op("GatherND", since=(11, 12, 13))
class GatherND(Op):
    def compute(self, data: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
        batch_dims = self.attrs.get("batch_dims") or 0
        depth = indices.shape[-1]
        dims = tf.shape(data, out_type=tf.int64)[batch_dims : batch_dims + depth]
        indices, in_range = in_range_indices(indices, dims)
        gathered = tf.gather_nd(data, indices, batch_dims=batch_dims)
        return zeros_where_out_of_range(gathered, tf.reduce_all(in_range, axis=-1), 0)


def scatter_reduce(
    data: tf.Tensor,
    coordinates: tf.Tensor,
    updates: tf.Tensor,
    reduction: str,
    keep: tf.Tensor,
) -> tf.Tensor:
    """Scatter ``updates`` [N] to ``coordinates`` [N, rank] of ``data``, combining by reduction;
    the updates where ``keep`` [N] is False (out-of-range coordinates) are dropped."""
    dims = tf.shape(data, out_type=tf.int64)
    size = tf.reduce_prod(dims)
    strides = tf.math.cumprod(dims, exclusive=True, reverse=True)
    linear = tf.reduce_sum(coordinates * strides, axis=-1)
    # Dropped updates go to one slot past the end, which is cut off again below.
    linear = tf.where(keep, linear, tf.fill(tf.shape(linear), size))
    flat = tf.concat([tf.reshape(data, [-1]), tf.zeros([1], data.dtype)], 0)
    if reduction == "none":
        combined = tf.tensor_scatter_nd_update(flat, linear[:, tf.newaxis], updates)
    elif reduction == "add":
        combined = flat + tf.math.unsorted_segment_sum(updates, linear, size + 1)
    elif reduction == "mul":
        combined = flat * tf.math.unsorted_segment_prod(updates, linear, size + 1)
    elif reduction == "max":
        combined = tf.maximum(flat, tf.math.unsorted_segment_max(updates, linear, size + 1))
    elif reduction == "min":
        combined = tf.minimum(flat, tf.math.unsorted_segment_min(updates, linear, size + 1))
    else:
        raise ValueError(f"unknown reduction {reduction!r}")
    return tf.reshape(combined[:size], dims)


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
        if indices.shape.is_fully_defined() and indices.shape != updates.shape:
            # PopART scatters the updates at the positions of the indices, which may be
            # fewer (operators_test/scatter_test.py, test_scatter_3).
            updates = tf.slice(updates, [0] * updates.shape.rank, indices.shape.as_list())
        indices, in_range = in_range_indices(indices, tf.shape(data, out_type=tf.int64)[axis])
        coordinates = tf.reshape(element_coordinates(indices, axis), [-1, data.shape.rank])
        return scatter_reduce(
            data,
            coordinates,
            tf.reshape(updates, [-1]),
            self.attrs.get("reduction") or "none",
            tf.reshape(in_range, [-1]),
        )


@register_op("ScatterND", since=(11, 13, 16, 18))
class ScatterND(Op):
    def setup(self) -> None:
        check_reduction(self)

    def compute(self, data: tf.Tensor, indices: tf.Tensor, updates: tf.Tensor) -> tf.Tensor:
        reduction = self.attrs.get("reduction") or "none"
        # Expand slice-addressing index tuples to one coordinate per updated element.
        rank = data.shape.rank
        depth = indices.shape[-1]
        dims = tf.shape(data, out_type=tf.int64)
        indices, in_range = in_range_indices(indices, dims[:depth])
        keep = tf.reshape(tf.reduce_all(in_range, axis=-1), [-1, 1])
        flat_indices = tf.reshape(indices, [-1, 1, depth])
        count = tf.shape(flat_indices)[0]
        if depth < rank:
            trailing = dims[depth:]
            grids = tf.meshgrid(
                *[tf.range(trailing[i]) for i in range(rank - depth)], indexing="ij"
            )
            inner = tf.reshape(tf.stack(grids, axis=-1), [1, -1, rank - depth])
            per_tuple = tf.shape(inner)[1]
            coordinates = tf.concat(
                [
                    tf.broadcast_to(flat_indices, [count, per_tuple, depth]),
                    tf.broadcast_to(inner, [count, per_tuple, rank - depth]),
                ],
                axis=-1,
            )
            keep = tf.broadcast_to(keep, [count, per_tuple])
        else:
            coordinates = flat_indices
        coordinates = tf.reshape(coordinates, [-1, rank])
        return scatter_reduce(
            data, coordinates, tf.reshape(updates, [-1]), reduction, tf.reshape(keep, [-1])
        )


@register_op("OneHot", since=(9, 11))
class OneHot(Op):
    def compute(self, indices: tf.Tensor, depth: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
        depth = tf.cast(tf.reshape(depth, []), tf.int32)
        if indices.dtype.is_floating:
            indices = tf.cast(indices, tf.int64)
        indices = wrap_negative(indices, depth)
        axis = normalize_axis(self.attrs.axis, indices.shape.rank + 1)
        off_value, on_value = values[0], values[1]
        # tf.one_hot has no gradient for its values; selecting between them has (the
        # original trains them: operators_test/onehot_test.py).
        hot = tf.one_hot(indices, depth, True, False, axis=axis, dtype=tf.bool)
        return tf.where(hot, on_value, off_value)


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


@register_op("TensorScatter", since=24)
class TensorScatter(Op):
    """A KV-cache write: update's sequence rows land at write_indices[batch] onwards along
    ``axis`` (modulo the cache length in circular mode). Each cache row picks the update row
    that lands on it, a gather rather than a scatter."""

    def setup(self) -> None:
        if self.attrs.mode not in ("linear", "circular"):
            self.bad_attribute("mode", f"must be linear or circular, not {self.attrs.mode!r}")

    def compute(self, past: tf.Tensor, update: tf.Tensor, write_indices=None) -> tf.Tensor:
        rank = past.shape.rank
        axis = normalize_axis(self.attrs.axis, rank)
        if axis == 0:
            self.bad_attribute("axis", "cannot be the batch axis")
        length, count = past.shape[axis], update.shape[axis]
        batch = tf.shape(past, out_type=tf.int64)[0]
        starts = tf.zeros([batch], tf.int64) if write_indices is None else write_indices
        row = tf.range(length, dtype=tf.int64)[None, :] - tf.cast(starts, tf.int64)[:, None]
        if self.attrs.mode == "circular":
            row = tf.math.floormod(row, length)
        valid = (row >= 0) & (row < count)  # [B, L]: cache rows the update writes
        picked = tf.gather(update, tf.clip_by_value(row, 0, count - 1), axis=axis, batch_dims=1)
        shape = [-1] + [1] * (axis - 1) + [length] + [1] * (rank - axis - 1)
        return tf.where(tf.reshape(valid, shape), picked, past)
