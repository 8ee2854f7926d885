"""Values exchanged between replicas: sums and gathers over groups, with their gradients.

Built on `lockstep.exchange`: each replica passes its tensor, and the last to arrive
builds the combination once. A sum's gradient is the sum of the replicas' gradients,
a gather's is each replica's slice of the summed gradients (as on the IPU, where the
gradient of an all-reduce is an all-reduce). Replicas split into consecutive groups
of `group_size`: {0..k-1}, {k..2k-1}, ...
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.framework import func_graph, ops

from openipu._src.engine.replicas import lockstep

# TF1 graphs differentiate with `tf.gradients`, which finds an op's gradient by its
# `_gradient_op_type`; the gradient of each exchange is kept here under that name.
_TF1_GRADIENTS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {}
_tf1_names = itertools.count()


@ops.RegisterGradient("OpenIPUReplicaExchange")
def _tf1_gradient(op: tf.Operation, upstream: tf.Tensor) -> tf.Tensor:
    return _TF1_GRADIENTS[op.name](upstream)


def _with_gradient(
    forward: Callable[[tf.Tensor], tf.Tensor],
    gradient: Callable[[tf.Tensor], tf.Tensor],
    x: tf.Tensor,
) -> tf.Tensor:
    """`forward(x)`, whose gradient for an upstream gradient g is `gradient(g)`."""
    if isinstance(ops.get_default_graph(), func_graph.FuncGraph) or tf.executing_eagerly():

        @tf.custom_gradient
        def exchanged(value):
            return forward(value), gradient

        return exchanged(x)
    result = forward(tf.stop_gradient(x))
    # An identity of x whose gradient is `gradient`, plus the exchanged value's difference.
    with ops.get_default_graph().gradient_override_map({"Identity": "OpenIPUReplicaExchange"}):
        carrier = tf.identity(x, name=f"replica_exchange_{next(_tf1_names)}")
    _TF1_GRADIENTS[carrier.op.name] = gradient
    return _carry(carrier, result)


def _carry(carrier: tf.Tensor, result: tf.Tensor) -> tf.Tensor:
    """`result`'s value, differentiated through `carrier` (of the shape of the input)."""
    if carrier.shape == result.shape:
        return carrier + tf.stop_gradient(result - carrier)
    # A gather: result is [k, *x.shape]; the carrier's gradient is taken from a zero sum.
    zero = tf.reduce_sum(carrier * 0.0)
    return tf.stop_gradient(result) + tf.cast(zero, result.dtype)


def _groups(count: int, group_size: int) -> list[range]:
    return [range(start, start + group_size) for start in range(0, count, group_size)]


def _sum_within_groups(x: tf.Tensor, group_size: int, kind: str) -> tf.Tensor:
    def combine(values: list[tf.Tensor]) -> list[tf.Tensor]:
        results: list[tf.Tensor] = []
        for group in _groups(len(values), group_size):
            total = tf.add_n([values[r] for r in group]) if len(group) > 1 else values[group[0]]
            results.extend([total] * len(group))
        return results

    return lockstep.exchange(x, combine, kind)


def _stack_within_groups(x: tf.Tensor, group_size: int, kind: str) -> tf.Tensor:
    def combine(values: list[tf.Tensor]) -> list[tf.Tensor]:
        results: list[tf.Tensor] = []
        for group in _groups(len(values), group_size):
            stacked = tf.stack([values[r] for r in group])
            results.extend([stacked] * len(group))
        return results

    return lockstep.exchange(x, combine, kind)


def replica_sum(x: tf.Tensor, group_size: int | None = None) -> tf.Tensor:
    """The sum of `x` over the replicas of this replica's group (all replicas by default)."""
    size = group_size or lockstep.replica_count()
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
    size = group_size or lockstep.replica_count()
    x = tf.convert_to_tensor(x)
    if size == 1:
        return tf.identity(x)[None]
    if not (x.dtype.is_floating or x.dtype.is_complex):
        return _stack_within_groups(x, size, "an all-gather")

    position = lockstep.replica_index() % size

    def gradient(upstream: tf.Tensor) -> tf.Tensor:
        return _sum_within_groups(upstream, size, "the gradient of an all-gather")[position]

    if isinstance(ops.get_default_graph(), func_graph.FuncGraph) or tf.executing_eagerly():
        return _with_gradient(
            lambda value: _stack_within_groups(value, size, "an all-gather"), gradient, x
        )
    # TF1 graphs: a gather's gradient is not wired (its value is exact).
    return _stack_within_groups(x, size, "an all-gather")
