"""Reduce across replicas, each replica keeping one slice (`ipu.reduce_scatter_op`)."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.ops import collectives


@collectives.collective_builder()
def reduce_scatter(
    x, replication_factor: int, op: str = "COLLECTIVE_OP_ADD", name: str | None = None
):
    """Reduces rank-1 `x` over each group; the replica at position p keeps slice p.

    The reduced vector of n elements is cut into `replication_factor` slices of
    ceil(n / replication_factor) elements, the last zero-padded. `x` may be a
    tensor or a list (or tuple) of tensors.
    """
    with tf.name_scope(name or "reduce_scatter"):
        op = collectives.check_collective_op(op, "reduce_scatter")
        group = collectives.replica_group(
            replication_factor, "replication_factor", "reduce_scatter"
        )
        if isinstance(x, (list, tuple)):
            return type(x)(_reduce_scatter(tf.convert_to_tensor(t), group, op) for t in x)
        return _reduce_scatter(tf.convert_to_tensor(x), group, op)


def _reduce_scatter(x: tf.Tensor, group: collectives.ReplicaGroup, op: str) -> tf.Tensor:
    if x.shape.rank != 1 or x.shape[0] is None:
        raise ValueError(
            f"reduce_scatter: every tensor must have rank 1 and a known length, got shape {x.shape}"
        )
    collectives.check_operand_dtype(op, x.dtype, "reduce_scatter")
    slice_length = -(-x.shape[0] // group.size)
    padded = tf.pad(x, [[0, slice_length * group.size - x.shape[0]]])
    reduced = collectives.group_reduce(op, padded, group)

    def own_slice(index: int, value: tf.Tensor) -> tf.Tensor:
        start = group.in_replica(index).position * slice_length
        return value[start : start + slice_length]

    return collectives.per_replica(own_slice, reduced)
