"""Sums and means across replicas (`ipu.cross_replica_ops`)."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.ops import collectives

_reductions_built = 0


def reductions_built() -> int:
    """How many cross-replica sums and means have been built (in any graph, any thread).

    A replicated IPUEstimator checks that its model_fn built one (the original looks
    for IpuCrossReplicaSum/Mean operations in the training graph, ipu_estimator.py).
    """
    return _reductions_built


def _count_reduction() -> None:
    global _reductions_built
    _reductions_built += 1


def assume_equal_across_replicas(tensors, inplace: bool = False):
    """Marks `tensors` (a structure) as equal on every replica; the values are unchanged.

    On the IPU this only tells the compiler that a conditional on these values
    cannot diverge between replicas; with or without `inplace`, the values pass
    through.
    """
    # `inplace` is read for its truth only (ops/cross_replica_ops.py: `if not inplace`), and
    # changes nothing here.
    return tf.nest.map_structure(tf.identity, tensors)


@collectives.collective_builder()
def cross_replica_sum(x, replica_group_size: int | None = None, name: str | None = None):
    """The sum of `x` over the replicas of this replica's group (all replicas by default)."""
    with tf.name_scope(name or "cross_replica_sum"):
        x = tf.convert_to_tensor(x)
        group = collectives.replica_group(
            replica_group_size, "replica_group_size", "cross_replica_sum"
        )
        _count_reduction()
        return collectives.group_reduce("COLLECTIVE_OP_ADD", x, group)


@collectives.collective_builder()
def cross_replica_mean(x, replica_group_size: int | None = None, name: str | None = None):
    """The mean of `x` over the replicas of this replica's group (all replicas by default).

    Integer tensors get the truncated quotient.
    """
    with tf.name_scope(name or "cross_replica_mean"):
        x = tf.convert_to_tensor(x)
        group = collectives.replica_group(
            replica_group_size, "replica_group_size", "cross_replica_mean"
        )
        _count_reduction()
        return collectives.group_reduce("COLLECTIVE_OP_MEAN", x, group)
