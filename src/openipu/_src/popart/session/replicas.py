"""A replicated session's replicas: the engine's replication, on the session's own device.

`SessionOptions.replicatedGraphCount` replicas of the graph run as the replicas of a
tf.distribute strategy whose extended part is the engine's `IPUReplicatedExtended` (the one
`IPUStrategy` uses for a device of several IPUs): every replica lives on the host device of
the session's emulated IPU, the session's `LoopProgram` runs each step on every replica, the
infeed hands replica r of step i its own slice, and outfeeds gain a replica axis. Variables
created in `scope()` are mirrored: each replica has its own copy of the weights and of the
optimizer state, which stay equal because every replica applies the same all-reduced update.
PopART sessions have no `configure_ipu_system`, so they build this strategy themselves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.distribute import distribute_lib

from openipu._src.engine import replication
from openipu._src.strategy.replicated_extended import IPUReplicatedExtended


class SessionReplicaStrategy(distribute_lib.Strategy):
    """R replicas of a session's program on one emulated IPU device's host device."""

    # The mirrored machinery numbers its collectives from here (as IPUStrategy's do).
    _collective_key_base = 0

    def __init__(self, ipu_ordinal: int, host_device: str, replicas: int) -> None:
        super().__init__(IPUReplicatedExtended(self, ipu_ordinal, host_device, replicas))


class Replicas:
    """How many replicas a session runs, and the scope its programs and variables need."""

    def __init__(self, count: int, ipu_ordinal: int, host_device: str) -> None:
        self.count = count
        self._strategy = (
            SessionReplicaStrategy(ipu_ordinal, host_device, count) if count > 1 else None
        )

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Where the session's variables are created and its program is traced and run."""
        if self._strategy is None:
            yield
            return
        with self._strategy.scope():
            yield

    @staticmethod
    def index() -> int:
        """Inside a step: the replica being built (0 without replication)."""
        return replication.current_replica_index()

    @staticmethod
    def all_reduce_sum(values: list[tf.Tensor]) -> list[tf.Tensor]:
        """Inside a step: each value summed over the replicas (unchanged with one replica)."""
        context = tf.distribute.get_replica_context()
        if not values or context is None or context.num_replicas_in_sync == 1:
            return values
        return context.all_reduce(tf.distribute.ReduceOp.SUM, values)
