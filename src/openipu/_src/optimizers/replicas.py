"""What the optimizer wrappers need from `tf.distribute`'s replicas.

On the IPU every replica holds its own copy of the variables and applies its
own gradients. The replicas of a compiled program (`engine.replicas`) do so; the
local replicas of a strategy spanning processes are `tf.distribute` replicas with
mirrored variables, whose optimizers sum the gradients of all replicas when they
apply them. For those the wrappers give IPU results on top: gradients meant to be
applied as they are go to a summing optimizer divided by the replica count (R
copies of the same gradient sum back to it), and per-replica state (accumulators,
counters) lives in sync-on-read variables, one copy per replica.

Replicas cannot each build a conditional of their own around a collective:
`cond_in_replicas` builds one conditional for all of them (`shared_cond` for a
compiled program's replicas; `merge_call` for mirrored replicas).
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from openipu._src.engine.replicas import lockstep, shared_cond


def in_strategy_replica() -> bool:
    """Whether the code being built runs in a replica of a (non-default) strategy."""
    return tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context()


def summing_replica_count() -> int:
    """How many replicas a stock optimizer applying gradients here sums over."""
    if not in_strategy_replica():
        return 1
    return int(tf.distribute.get_replica_context().num_replicas_in_sync)


def create_state(create: Callable[[], None]) -> None:
    """Runs `create()`, which makes variables, outside any function being traced.

    Under a strategy it runs once, in the strategy's cross-replica context,
    where tf.distribute makes per-replica and mirrored variables; every replica
    must call this at the same point.
    """

    def create_lifted(*_) -> None:
        with tf.init_scope():
            create()

    if in_strategy_replica():
        tf.distribute.get_replica_context().merge_call(create_lifted)
    else:
        create_lifted()


def per_replica_variable(initial_value, name: str) -> tf.Variable:
    """A non-trainable variable with one copy per replica (replica 0's is read outside them)."""
    return tf.Variable(
        initial_value,
        trainable=False,
        name=name,
        synchronization=tf.VariableSynchronization.ON_READ,
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
    )


def cond_in_replicas(pred: tf.Tensor, true_fn: Callable[[], object]) -> tf.Tensor:
    """Runs `true_fn()` in every replica when `pred` (equal on all replicas) holds.

    `true_fn` may synchronise the replicas (apply gradients with a stock
    optimizer, all-reduce). Under a tf.distribute strategy's replicas it must not
    close over tensors of one replica: it is called again in each replica, inside
    the conditional (a compiled program's replicas each call their own).
    Returns a bool tensor that is `pred` once `true_fn`'s effects are done.
    """
    if lockstep.replica_count() > 1 or not in_strategy_replica():
        # Replicas of a compiled program build one conditional (`shared_cond`).
        return shared_cond.cond(pred, true_fn)

    def merged(strategy: tf.distribute.Strategy, per_replica_pred) -> tf.Tensor:
        # Every replica's predicate takes part, so that the updates each one
        # made before it are done before the conditional runs.
        agreed = tf.reduce_all(tf.stack(strategy.experimental_local_results(per_replica_pred)))

        def taken() -> tf.Tensor:
            done = strategy.extended.call_for_each_replica(
                lambda: shared_cond.done_after(true_fn())
            )
            return tf.reduce_all(tf.stack(strategy.experimental_local_results(done)))

        return tf.cond(agreed, taken, lambda: tf.constant(False))

    return tf.distribute.get_replica_context().merge_call(merged, args=(pred,))
