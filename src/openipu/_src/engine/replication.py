"""Which replica the code being built belongs to, and how many replicas run.

Replicas are built by the engine's lock-step replication (`engine.replicas`), which
says which replica a thread builds; code still replicated on `tf.distribute`'s
mirrored machinery (PopART sessions, strategies spanning processes) asks the
strategy's replica context instead. Outside any replicated execution there is one
replica.

A strategy spanning several processes (`distributed`) counts every process's
replicas in `num_replicas_in_sync`; the engine builds and feeds only this
process's, so the counts and indices here are local unless named global.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.distribute import values as distribute_values
from tensorflow.python.util import nest

from openipu._src.engine.replicas import lockstep

_state = threading.local()


@contextlib.contextmanager
def slots_per_replica(count: int) -> Iterator[None]:
    """Within this context, every `count` consecutive strategy replicas are one replica.

    A program that needs k IPUs runs on k replica slots of the strategy (one per
    IPU); what it reports (outfeeds) counts replicas, not slots.
    """
    previous = getattr(_state, "slots", 1)
    _state.slots = count
    try:
        yield
    finally:
        _state.slots = previous


def current_replica_count() -> int:
    if lockstep.current() is not None:
        return lockstep.replica_count()
    if not _in_replica():
        return 1
    slots = local_replica_count()
    return max(1, slots // getattr(_state, "slots", 1))


def current_replica_index() -> int:
    if lockstep.current() is not None:
        return lockstep.replica_index()
    if not _in_replica():
        return 0
    slot = _global_slot() % local_replica_count()
    return slot // getattr(_state, "slots", 1)


def current_slot_index() -> int:
    """The strategy replica (slot) being built, whatever `slots_per_replica` says."""
    if lockstep.current() is not None:
        return lockstep.replica_index()
    if not _in_replica():
        return 0
    return _global_slot() % local_replica_count()


def current_slots_per_replica() -> int:
    """How many strategy replicas make one replica here (see `slots_per_replica`)."""
    return getattr(_state, "slots", 1)


def global_replica_index() -> int:
    """Index of the replica being built among every process's replicas."""
    if lockstep.current() is not None:
        return lockstep.replica_index()
    if not _in_replica():
        return 0
    return _global_slot() // getattr(_state, "slots", 1)


def _global_slot() -> int:
    replica_id = tf.distribute.get_replica_context().replica_id_in_sync_group
    return replica_id if isinstance(replica_id, int) else int(tf.get_static_value(replica_id))


def local_replica_count(strategy=None) -> int:
    """tf.distribute replicas of `strategy` (the current one by default) in this process.

    One for the IPU strategies (their programs replicate, `engine.replicas`), also for
    those spanning processes, whose `num_replicas_in_sync` counts every process's
    program replicas; several for tf.distribute's mirrored strategies.
    """
    strategy = strategy or tf.distribute.get_strategy()
    try:
        return len(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy has no devices: one replica
        return strategy.num_replicas_in_sync


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
    """This process's replicas of the current strategy (in its cross-replica context; 1 without)."""
    return local_replica_count()


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
    replicas = local_replica_count(strategy)
    if replicas > 1 and element is not None:
        args = (
            nest.map_structure(
                lambda t: distribute_values.PerReplica(tuple(t[r] for r in range(replicas))),
                element,
            ),
        )
    outputs = strategy.run(thread_state.for_replicas(fn, ipu_ordinal), args=args)
    return tf.group(strategy.experimental_local_results(outputs))
