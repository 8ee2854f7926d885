"""Conditionals of replicated programs: one conditional, each branch building every replica.

On an IPU all replicas take the same branch of a conditional whose predicate they
agree on (a gradient accumulation optimizer applies its update every N-th step), and
collectives inside the branch synchronise them. Replicas built in lock-step
(`lockstep`) would each build a conditional of their own, whose branches could not
meet; so a conditional built by a replica is a meeting point where the replicas build
*one* conditional, whose taken branch builds every replica's branch
(`replicated.build`), as a shared device loop builds every replica's body.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from openipu._src.engine.replicas import lockstep, replicated
from openipu._src.engine.replicas.variable_copies import variables_untouched
from openipu._src.engine.value_types import Nested


def cond(pred: tf.Tensor, true_fn: Callable[[], tf.Tensor]) -> tf.Tensor:
    """`true_fn()` in every replica when every replica's `pred` holds; a bool tensor after.

    Each replica's own `true_fn` (closing over its own state) is called inside the
    conditional, in that replica; it returns a tensor that depends on its effects.
    Outside replicated building it is a plain `tf.cond`.
    """
    if lockstep.replica_count() == 1:
        return tf.cond(pred, lambda: done_after(true_fn()), lambda: tf.constant(False))

    def combine(values: list[tuple[tf.Tensor, Callable[[], tf.Tensor]]]) -> list[tf.Tensor]:
        replicas = len(values)
        branches = [branch for _, branch in values]

        def taken() -> tf.Tensor:
            done = replicated.build_once(lambda r, _: done_after(branches[r]()), replicas)
            return tf.reduce_all(tf.stack(done))

        with lockstep.outside_replicas(), variables_untouched():
            agreed = tf.reduce_all(tf.stack([tf.convert_to_tensor(p) for p, _ in values]))
            result = tf.cond(agreed, taken, lambda: tf.constant(False))
        return [result] * replicas

    return lockstep.exchange((pred, true_fn), combine, "a conditional")


def done_after(effects: Nested) -> tf.Tensor:
    """True, once `effects` (tensors, operations or None) are done."""
    effects = [e for e in tf.nest.flatten(effects) if e is not None]
    with tf.control_dependencies(effects):
        return tf.constant(True)
