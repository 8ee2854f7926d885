"""Which replica the code being built belongs to, and how many replicas run.

Replicas are built by the engine's lock-step replication (`engine.replicas`), which
says which replica a thread builds; outside it there is one replica. The indices
here are this process's; a program spanning processes numbers its replicas
globally where programs see them (`exchange_ops.global_replica_index`).
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from openipu._src.engine.replicas import lockstep
from openipu._src.engine.value_types import Nested


def current_replica_count() -> int:
    return lockstep.replica_count()


def current_replica_index() -> int:
    return lockstep.replica_index()


def local_replica_count(strategy: tf.distribute.Strategy | None = None) -> int:
    """tf.distribute replicas of `strategy` (the current one by default) in this process.

    One for the IPU strategies (their programs replicate, `engine.replicas`), also for
    those spanning processes, whose `num_replicas_in_sync` counts every process's
    program replicas; several for tf.distribute's mirrored strategies.
    """
    strategy = strategy or tf.distribute.get_strategy()
    try:
        return len(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy has no devices: one replica
        count: int = strategy.num_replicas_in_sync
        return count


def run_in_replica_context(fn: Callable[..., Nested], *args: Nested) -> Nested:
    """Calls `fn(*args)` in the replica context of the current distribution strategy.

    Steps (Keras train steps, optimizer updates) expect a replica context, as
    `strategy.run` gives them; a program traced in a strategy's scope is in its
    cross-replica context.
    """
    if tf.distribute.in_cross_replica_context():
        return tf.distribute.get_strategy().extended.call_for_each_replica(fn, args)
    return fn(*args)
