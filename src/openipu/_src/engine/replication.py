"""Which replica the code being built belongs to, and how many replicas run.

Replicas run on `tf.distribute` (see `strategy`): inside a replica function
the distribution strategy's replica context says which one this is. Outside
any replicated execution there is one replica.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.distribute import values as distribute_values
from tensorflow.python.util import nest


def current_replica_count() -> int:
    return int(tf.distribute.get_replica_context().num_replicas_in_sync) if _in_replica() else 1


def current_replica_index() -> int:
    if not _in_replica():
        return 0
    replica_id = tf.distribute.get_replica_context().replica_id_in_sync_group
    return replica_id if isinstance(replica_id, int) else int(tf.get_static_value(replica_id))


def _in_replica() -> bool:
    return tf.distribute.get_replica_context() is not None


def run_in_replica_context(fn, *args):
    """Calls `fn(*args)` in the replica context of the current distribution strategy.

    Steps (Keras train steps, optimizer updates) expect a replica context, as
    `strategy.run` gives them; a program traced in a strategy's scope is in its
    cross-replica context.
    """
    if tf.distribute.in_cross_replica_context():
        return tf.distribute.get_strategy().extended.call_for_each_replica(fn, args)
    return fn(*args)


def strategy_replica_count() -> int:
    """Replicas of the current strategy (in its cross-replica context; 1 without one)."""
    return tf.distribute.get_strategy().num_replicas_in_sync


def run_on_replicas(fn, element, ipu_ordinal: int | None = None) -> tf.Operation:
    """Runs `fn(element)` (or `fn()`) in every replica's context; returns an op for all of them.

    `element` holds one slice per replica along its first axis when there are
    several replicas. `fn` returns a tensor that depends on its work.
    """
    from openipu._src.engine import thread_state

    args = () if element is None else (element,)
    if not tf.distribute.in_cross_replica_context():
        return tf.group(fn(*args))
    strategy = tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    if replicas > 1 and element is not None:
        args = (
            nest.map_structure(
                lambda t: distribute_values.PerReplica(tuple(t[r] for r in range(replicas))),
                element,
            ),
        )
    outputs = strategy.run(thread_state.for_replicas(fn, ipu_ordinal), args=args)
    return tf.group(strategy.experimental_local_results(outputs))
