"""A replicated session's replicas: the engine's replication, on the session's own device.

`SessionOptions.replicatedGraphCount` replicas of the graph are built into the session's
program by the engine (`engine.replicas`), as `IPUStrategy` programs are: each replica has its
own copy of the weights and optimizer state (which stay equal, as every replica applies the
same summed update), its own slice of each step's inputs, and outfeeds gain a replica axis.
The host reads replica 0's weights; weights written from the host reach every replica.
Weights grouped by their VariableSettings keep every group's value in each copy, and each
replica uses its group's (`grouped_weights.py`).
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.engine.replicas import exchange_ops, lockstep


class Replicas:
    """How many replicas a session runs, and what its steps exchange between them."""

    def __init__(self, count: int) -> None:
        self.count = count

    @staticmethod
    def index() -> int:
        """Inside a step: the replica being built (0 without replication)."""
        return lockstep.replica_index()

    @staticmethod
    def all_reduce_sum(values: list[tf.Tensor]) -> list[tf.Tensor]:
        """Inside a step: each value summed over the replicas (unchanged with one replica)."""
        if lockstep.replica_count() == 1:
            return values
        return [exchange_ops.replica_sum(value) for value in values]
