"""Values exchanged between replicas: sums and gathers over groups, with their gradients.

Built on `lockstep.exchange`: each replica passes its tensor, and the last to arrive
builds the combination once. A sum's gradient is the sum of the replicas' gradients,
a gather's is each replica's slice of the summed gradients (as on the IPU, where the
gradient of an all-reduce is an all-reduce). Replicas split into consecutive groups
of `group_size`: {0..k-1}, {k..2k-1}, ...

Under a strategy spanning processes (`processes`) replicas are numbered globally
(process index * local replicas + local index); a group of every replica of every
process combines the local replicas, then the processes' results, with the
strategy's collectives (once per process: the last local replica builds it).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.framework import func_graph, ops

from openipu._src.engine.replicas import lockstep, processes

Gradient = Callable[[tf.Tensor], tf.Tensor]

# TF1 graphs differentiate with `tf.gradients`, which finds an op's gradient by its
# `_gradient_op_type`; the gradient of each exchange is kept here, per graph, by op name.
_TF1_GRADIENTS: weakref.WeakKeyDictionary[ops.Graph, dict[str, Gradient]] = (
    weakref.WeakKeyDictionary()
)
_tf1_names = itertools.count()


def _tf1_gradient(op: tf.Operation, upstream: tf.Tensor) -> tf.Tensor:
    return _TF1_GRADIENTS[op.graph][op.name](upstream)


ops.RegisterGradient("OpenIPUReplicaExchange")(_tf1_gradient)


def _differentiated_by_tapes() -> bool:
    """TF2 functions and eager code (gradient tapes), as opposed to TF1 graphs."""
    return isinstance(ops.get_default_graph(), func_graph.FuncGraph) or tf.executing_eagerly()


def _ignoring_variables(gradient: Gradient) -> Callable[..., object]:
    """`gradient` for `tf.custom_gradient`, whose forward may read variables.

    A cross-process stage reads its collectives' ordering token (a resource variable),
    which has no gradient.
    """

    def with_variables(
        upstream: tf.Tensor, variables: list[tf.Variable] | None = None
    ) -> tf.Tensor | tuple[tf.Tensor, list[None]]:
        if variables:
            return gradient(upstream), [None] * len(variables)
        return gradient(upstream)

    return with_variables


def _with_gradient(forward: Gradient, gradient: Gradient, x: tf.Tensor) -> tf.Tensor:
    """`forward(x)` (of x's shape), whose gradient for an upstream gradient g is `gradient(g)`."""
    if _differentiated_by_tapes():

        def exchanged(value: tf.Tensor) -> tuple[tf.Tensor, Callable[..., object]]:
            return forward(value), _ignoring_variables(gradient)

        return tf.custom_gradient(exchanged)(x)
    result = forward(tf.stop_gradient(x))
    # An identity of x whose gradient is `gradient`, carrying the exchanged value.
    graph = ops.get_default_graph()
    with graph.gradient_override_map({"Identity": "OpenIPUReplicaExchange"}):
        carrier = tf.identity(x, name=f"replica_exchange_{next(_tf1_names)}")
    _TF1_GRADIENTS.setdefault(graph, {})[carrier.op.name] = gradient
    return carrier + tf.stop_gradient(result - carrier)


def _groups(count: int, group_size: int) -> list[range]:
    return [range(start, start + group_size) for start in range(0, count, group_size)]


def _combined_within_groups(
    x: tf.Tensor, group_size: int, kind: str, combine: Callable[[list[tf.Tensor]], tf.Tensor]
) -> tf.Tensor:
    """`combine` of the `x` of this replica's group (built once per group)."""

    def per_replica(values: list[tf.Tensor]) -> list[tf.Tensor]:
        results: list[tf.Tensor] = []
        for group in _groups(len(values), group_size):
            combined = combine([values[r] for r in group])
            results.extend([combined] * len(group))
        return results

    return lockstep.exchange(x, per_replica, kind)


def _sum(values: list[tf.Tensor]) -> tf.Tensor:
    return tf.add_n(values) if len(values) > 1 else values[0]


def _exchanged_in_groups(
    x: tf.Tensor,
    group_size: int,
    kind: str,
    local_combine: Callable[[list[tf.Tensor]], tf.Tensor],
) -> tf.Tensor:
    """`local_combine` of the `x` of this replica's group of `group_size` global replicas.

    A group within this process's replicas combines locally; a group of every process's
    replicas combines the local replicas, then the processes' results; a group spanning
    some processes combines from every replica's value, gathered across the processes.
    """
    local = lockstep.replica_count()
    spanned = processes.current()
    if spanned is None or (group_size <= local and local % group_size == 0):
        return _combined_within_groups(x, group_size, kind, local_combine)
    if group_size == local * spanned.count:
        across = spanned.sum if local_combine is _sum else spanned.gather
        return _combined_within_groups(x, local, kind, lambda v: across(local_combine(v)))

    def per_replica(values: list[tf.Tensor]) -> list[tf.Tensor]:
        # Every replica's value in global order (process index * local + local index).
        everyone = spanned.gather(tf.stack(values))
        total = local * spanned.count
        results = []
        for replica in range(spanned.index * local, (spanned.index + 1) * local):
            start = replica // group_size * group_size
            members = range(start, min(start + group_size, total))
            results.append(local_combine([everyone[member] for member in members]))
        return results

    return lockstep.exchange(x, per_replica, kind)


def _sum_within_groups(x: tf.Tensor, group_size: int, kind: str) -> tf.Tensor:
    return _exchanged_in_groups(x, group_size, kind, _sum)


def _stack_within_groups(x: tf.Tensor, group_size: int, kind: str) -> tf.Tensor:
    return _exchanged_in_groups(x, group_size, kind, tf.stack)


def global_replica_count() -> int:
    """Replicas of the program being built in every process it spans."""
    return lockstep.replica_count() * processes.count()


def global_replica_index() -> int:
    """The replica being built among every process's replicas."""
    return global_index(lockstep.replica_index())


def global_index(local_index: int) -> int:
    """Local replica `local_index` among every process's replicas."""
    return processes.index() * lockstep.replica_count() + local_index


def replica_sum(x: tf.Tensor, group_size: int | None = None) -> tf.Tensor:
    """The sum of `x` over the replicas of this replica's group (all replicas by default)."""
    size = group_size or global_replica_count()
    x = tf.convert_to_tensor(x)
    if size == 1:
        return tf.identity(x)
    if not (x.dtype.is_floating or x.dtype.is_complex):
        return _sum_within_groups(x, size, "a cross-replica sum")

    return _with_gradient(
        lambda value: _sum_within_groups(value, size, "a cross-replica sum"),
        lambda upstream: _sum_within_groups(upstream, size, "the gradient of a cross-replica sum"),
        x,
    )


def replica_gather(x: tf.Tensor, group_size: int | None = None) -> tf.Tensor:
    """`[k, *x.shape]`: the `x` of every replica of this replica's group, in replica order."""
    size = group_size or global_replica_count()
    x = tf.convert_to_tensor(x)
    if size == 1:
        return tf.identity(x)[None]
    if not (x.dtype.is_floating or x.dtype.is_complex):
        return _stack_within_groups(x, size, "an all-gather")

    def gradient(upstream: tf.Tensor) -> tf.Tensor:
        summed = _sum_within_groups(upstream, size, "the gradient of an all-gather")
        # This replica's slice: Python of the replica (a program traced once copies it).
        return lockstep.per_replica(lambda index, value: value[global_index(index) % size], summed)

    if _differentiated_by_tapes():

        def gathered(value: tf.Tensor) -> tuple[tf.Tensor, Callable[..., object]]:
            return _stack_within_groups(value, size, "an all-gather"), _ignoring_variables(gradient)

        return tf.custom_gradient(gathered)(x)

    # TF1 graphs: the exchange is carried by x tiled to the gather's shape, whose gradient
    # (all of it in the first slice) `tf.stack` sums back into x.
    def of_tiled(upstream: tf.Tensor) -> tf.Tensor:
        return tf.concat([gradient(upstream)[None], tf.zeros_like(upstream[1:])], axis=0)

    return _with_gradient(
        lambda tiled: _stack_within_groups(tiled[0], size, "an all-gather"),
        of_tiled,
        tf.stack([x] * size),
    )
