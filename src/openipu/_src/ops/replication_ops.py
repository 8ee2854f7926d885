"""The index of the replica being run (`ipu.replication_ops`)."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.ops import collectives


@collectives.collective_builder(differs_between_replicas=True)
def replication_index(name: str | None = None) -> tf.Tensor:
    """An int32 scalar: the index of this replica, 0 to R - 1 (0 without replication)."""
    with tf.name_scope(name or "replication_index"):
        # Each replica's own constant (a program traced once builds one per replica).
        return collectives.per_replica(lambda index, _: tf.constant(index, tf.int32))
