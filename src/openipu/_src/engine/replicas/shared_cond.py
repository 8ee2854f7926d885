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
from typing import Any

import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.engine.replicas import lockstep, replicated, traced_once
from openipu._src.engine.replicas.variable_copies import variables_untouched
from openipu._src.engine.value_types import Nested
from openipu._src.integration import replicated_conds


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


def _user_cond(
    stock: Callable[..., Any],
    pred: Any,
    true_fn: Callable[[], Any],
    false_fn: Callable[[], Any],
    name: Any = None,
) -> Any:
    """A `tf.cond` of the user's: as TensorFlow builds it, unless its branches hold a
    collective in a program traced once; then one cond for every replica (`_shared`).

    The replicas are assumed to agree on the predicate, as the original requires of a
    conditional around a collective (`assume_equal_across_replicas`): replica 0's decides.
    """
    group = group_building_here()
    if group is None:
        return stock(pred, true_fn, false_fn, name)
    try:
        with group.branches_may_meet():
            return stock(pred, true_fn, false_fn, name)
    except Exception as error:  # noqa: BLE001 - autograph re-raises it as its own error
        if replicated.cause(error, traced_once.MeetingInBranch) is None:
            raise
    return _shared(pred, true_fn, false_fn)


def group_building_here() -> traced_once.TracedOnceGroup | None:
    """The group traced once whose replica 0 builds at its top level here, if any."""
    group = lockstep.recording()
    if group is None or tf.compat.v1.get_default_graph() is not group.graph:
        return None
    return group


def _shared(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any]) -> Any:
    """One conditional on replica 0's predicate whose branches build every replica's."""

    def combine(values: list[tuple[Any, Any, Any]]) -> list[Any]:
        replicas = len(values)
        structure: list[Any] = []

        def every_replica(fn: Callable[[], Any]) -> Callable[[], list[tf.Tensor]]:
            def build() -> list[tf.Tensor]:
                outputs = replicated.build_once(lambda r, _: fn(), replicas)
                structure[:] = [outputs[0]]
                flat = [nest.flatten(output) for output in outputs]
                return [tf.stack(values) for values in zip(*flat, strict=True)]

            return build

        with lockstep.outside_replicas(), variables_untouched():
            decided = tf.convert_to_tensor(values[0][0])
            stacked = tf.cond(decided, every_replica(true_fn), every_replica(false_fn))
        return [
            nest.pack_sequence_as(structure[0], [tensor[r] for tensor in stacked])
            for r in range(replicas)
        ]

    return lockstep.exchange((pred, true_fn, false_fn), combine, "a conditional")


replicated_conds.install(_user_cond)
