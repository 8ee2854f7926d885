"""Raw PopOps operations (`gen_popops_ops`): collectives across replicas and multi-slices.

Arguments, attribute defaults and output shapes follow the original's op registrations
(tensorflow/compiler/plugin/poplar/ops/popops/*.cc); the work is done by the public
operators' implementations.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.engine import region
from openipu._src.int_like import as_attr_int
from openipu._src.ops import (
    all_to_all_op,
    collectives,
    cross_replica_ops,
    image_ops,
    reduce_scatter_op,
    slicing_ops,
    statistics_ops,
)


def _group_size(replica_group_size) -> int | None:
    # The attribute's default, 0, means every replica (popops/cross_replica_sum.cc).
    size = as_attr_int(replica_group_size, "replica_group_size")
    return None if size == 0 else size


def ipu_cross_replica_sum(input, replica_group_size=0, name=None) -> tf.Tensor:  # noqa: A002
    """The sum of `input` over the replicas of this replica's group."""
    return cross_replica_ops.cross_replica_sum(
        input, _group_size(replica_group_size), name=name or "IpuCrossReplicaSum"
    )


def ipu_cross_replica_mean(input, replica_group_size=0, name=None) -> tf.Tensor:  # noqa: A002
    """The mean of `input` over the replicas of this replica's group."""
    return cross_replica_ops.cross_replica_mean(
        input, _group_size(replica_group_size), name=name or "IpuCrossReplicaMean"
    )


def ipu_all_gather(inputs, replication_factor, name=None) -> list[tf.Tensor]:
    """For each of `inputs`, `[replication_factor, *shape]`: every replica's value."""
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"ipu_all_gather: inputs must be a list of tensors, got {inputs!r}")
    if not inputs:
        raise ValueError("ipu_all_gather: inputs must hold at least one tensor, got []")
    factor = as_attr_int(replication_factor, "ipu_all_gather: replication_factor")
    tensors = [tf.convert_to_tensor(x) for x in inputs]
    if _outside_replicated_programs(factor):
        # Only the shape is known outside an IPU program (the original's op has its shape
        # function everywhere and a kernel on the IPU only, popops/all_to_all.cc).
        return [_runs_on_ipu_only(x, [factor, *x.shape], "IpuAllGather") for x in tensors]
    return list(all_to_all_op.all_gather(tensors, factor, name=name or "IpuAllGather"))


def ipu_all_to_all(
    input,  # noqa: A002
    split_dimension,
    concat_dimension,
    number_of_replicas,
    name=None,
) -> tf.Tensor:
    """XLA's AllToAll within each group of `number_of_replicas` replicas."""
    return all_to_all_op.all_to_all(
        input, split_dimension, concat_dimension, number_of_replicas, name=name or "IpuAllToAll"
    )


def _outside_replicated_programs(group_size: int) -> bool:
    """Whether a collective over `group_size` replicas is built where no replicas exist (not
    in a program, nor in a plain TF1 ipu_scope, which runs on its device's replicas)."""
    return (
        group_size > 1
        and region.current_region() is None
        and collectives.plain_ipu_scope() is None
        and collectives.replica_count() == 1
    )


def _runs_on_ipu_only(x: tf.Tensor, shape: list, op_type: str) -> tf.Tensor:
    """A tensor of `shape` that fails when run: `op_type` was built outside IPU programs."""
    failing = tf.debugging.Assert(
        False,
        [
            f"{op_type} has no kernel outside an IPU program: build it inside ipu_compiler.compile "
            "or IPUStrategy.run on replicated IPUs"
        ],
    )
    with tf.control_dependencies([failing]):
        return tf.zeros(shape, x.dtype)


def ipu_multi_slice(input, indices, indices_are_sorted=False, name=None) -> tf.Tensor:  # noqa: A002
    """`[*indices.shape, input.shape[1]]`: the rows of the rank-2 `input` that `indices` name."""
    with tf.name_scope(name or "IpuMultiSlice"):
        table, indices = _table_and_indices(input, indices, "ipu_multi_slice")
        # Indices outside the table give rows of zeros (as a serialized embedding_lookup's).
        return _rows_where(_valid(indices, table), tf.gather(table, _clipped(indices, table)))


def ipu_multi_update(
    input,  # noqa: A002
    indices,
    updates,
    indices_are_sorted=False,
    name=None,
) -> tf.Tensor:
    """`input` with row `indices[i]` replaced by `updates[i]`."""
    with tf.name_scope(name or "IpuMultiUpdate"):
        table, indices, updates = _update_operands(input, indices, updates, "ipu_multi_update")
        return _scattered(tf.tensor_scatter_nd_update, table, indices, updates)


def ipu_multi_update_add(
    input,  # noqa: A002
    indices,
    updates,
    scale,
    indices_are_sorted=False,
    name=None,
) -> tf.Tensor:
    """`input` plus `scale * updates[i]` added at row `indices[i]` for every i."""
    with tf.name_scope(name or "IpuMultiUpdateAdd"):
        table, indices, updates = _update_operands(input, indices, updates, "ipu_multi_update_add")
        scale = tf.convert_to_tensor(scale, table.dtype)
        if scale.shape.rank not in (None, 0):
            # The original's kernel (kernels/popops/multi_slice.cc), in TensorShape's words.
            dims = ",".join("?" if d is None else str(d) for d in scale.shape.as_list())
            raise tf.errors.InvalidArgumentError(
                None, None, f"scale must be a scalar, but got: [{dims}]"
            )
        return _scattered(tf.tensor_scatter_nd_add, table, indices, updates * scale)


def _table_and_indices(table, indices, what: str) -> tuple[tf.Tensor, tf.Tensor]:
    table = tf.convert_to_tensor(table)
    if table.shape.rank not in (None, 2):
        # The shape function's rule (popops/multi_slice.cc: WithRank(input, 2)).
        raise ValueError(f"{what}: input must have rank 2, got shape {table.shape}")
    indices = tf.convert_to_tensor(indices)
    if indices.dtype != tf.int32:
        raise TypeError(f"{what}: indices must be int32, got dtype {indices.dtype.name}")
    return table, indices


def _update_operands(table, indices, updates, what: str):
    table = tf.convert_to_tensor(table)
    indices = tf.convert_to_tensor(indices)
    if indices.dtype != tf.int32:
        raise TypeError(f"{what}: indices must be int32, got dtype {indices.dtype.name}")
    updates = tf.convert_to_tensor(updates, table.dtype)
    expected = indices.shape.concatenate(table.shape[1:])
    if not updates.shape.is_compatible_with(expected):
        raise ValueError(
            f"{what}: updates must have shape indices.shape + input.shape[1:] = {expected}, "
            f"got {updates.shape}"
        )
    return table, indices, updates


def _clipped(indices: tf.Tensor, table: tf.Tensor) -> tf.Tensor:
    return tf.clip_by_value(indices, 0, tf.shape(table)[0] - 1)


def _valid(indices: tf.Tensor, table: tf.Tensor) -> tf.Tensor:
    return (indices >= 0) & (indices < tf.shape(table)[0])


def _rows_where(valid: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
    """`values` with the rows (leading dimensions the shape of `valid`) not valid zeroed."""
    inner_rank = tf.rank(values) - tf.rank(valid)
    mask = tf.reshape(valid, tf.concat([tf.shape(valid), tf.ones([inner_rank], tf.int32)], 0))
    return tf.where(mask, values, tf.zeros_like(values))


def _scattered(scatter, table: tf.Tensor, indices: tf.Tensor, updates: tf.Tensor) -> tf.Tensor:
    """`scatter(table, indices, updates)` over rows, indices outside `table` changing nothing
    (TensorFlow's host kernels would fail on them): they go to a spare row, cut off after."""
    rows = tf.shape(table)[0]
    flat_indices = tf.reshape(indices, [-1])
    flat_updates = tf.reshape(updates, tf.concat([[-1], tf.shape(table)[1:]], 0))
    target = tf.where(_valid(flat_indices, table), flat_indices, rows)
    padded = tf.concat([table, tf.zeros_like(table[:1])], 0)
    return tf.ensure_shape(scatter(padded, target[:, None], flat_updates)[:rows], table.shape)


def ipu_sequence_slice(
    dst,
    src,
    num_elems,
    src_offsets,
    dst_offsets,
    zero_unused=False,
    name=None,
) -> tf.Tensor:
    """`dst` with rows `dst_offsets[i]:+num_elems[i]` copied from `src_offsets[i]:` of `src`."""
    with tf.name_scope(name or "IpuSequenceSlice"):
        return slicing_ops.sequence_slice(
            dst, src, num_elems, src_offsets, dst_offsets, bool(zero_unused)
        )


def ipu_sequence_slice_unpack(
    src,
    num_elems,
    src_offsets,
    dst_offsets,
    total_elements,
    name=None,
) -> tf.Tensor:
    """`total_elements` rows: the runs of `src` gathered one after the other."""
    with tf.name_scope(name or "IpuSequenceSliceUnpack"):
        src = tf.convert_to_tensor(src)
        rows = as_attr_int(total_elements, "ipu_sequence_slice_unpack: total_elements")
        if rows < 0:
            raise ValueError(f"ipu_sequence_slice_unpack: total_elements must be >= 0, got {rows}")
        # Output shape: src's with dimension 0 replaced by total_elements (sequence_slice.cc).
        dst = tf.zeros(tf.concat([[rows], tf.shape(src)[1:]], 0), src.dtype)
        return slicing_ops.sequence_slice(
            dst, src, num_elems, src_offsets, dst_offsets, zero_unused=True
        )


def ipu_reduce_scatter(inputs, op, replication_factor, name=None) -> list[tf.Tensor]:
    """For each rank-1 tensor of `inputs`: `op` over the group, this replica's slice of it."""
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"ipu_reduce_scatter: inputs must be a list of tensors, got {inputs!r}")
    return list(
        reduce_scatter_op.reduce_scatter(
            list(inputs), replication_factor, op=op, name=name or "IpuReduceScatter"
        )
    )


def normalise_image(image, channel_offsets, channel_scales, scale, name=None) -> tf.Tensor:
    """Pads 3 channels to 4 and normalises: `(image[c] * scale - offsets[c]) * scales[c]`."""
    return image_ops.normalise_image(
        image, channel_offsets, channel_scales, scale=scale, name=name or "NormaliseImage"
    )


def ipu_histogram(input, levels, absolute_of_input, name=None) -> tf.Tensor:  # noqa: A002
    """float32 counts of `input` in the len(levels) + 1 bins the sorted `levels` bound."""
    with tf.name_scope(name or "IpuHistogram"):
        return statistics_ops.histogram(input, levels, absolute_of_input=bool(absolute_of_input))


def ipu_histogram_update(hist, input, levels, absolute_of_input, name=None) -> tf.Tensor:  # noqa: A002
    """`hist` plus the histogram of `input` over `levels`."""
    with tf.name_scope(name or "IpuHistogramUpdate"):
        return statistics_ops.histogram_update(
            hist, input, levels, absolute_of_input=bool(absolute_of_input)
        )
