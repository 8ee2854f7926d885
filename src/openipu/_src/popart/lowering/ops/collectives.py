"""PopART's replicated collectives (ai.graphcore ReplicatedAllReduce, ReplicatedReduceScatter).

Each replica of a replicated session builds its own copy of the lowered graph (the engine's
lock-step replicas); a collective is a meeting of those copies (`lockstep.exchange`). The
replicas meet in groups given by the node's comm group (the `__collectiveCommGroup`
annotation the builder writes: [CommGroupType, replica group size]; absent: all replicas),
as `willow/include/popart/commgroup.hpp` defines them: `All` one group, `Consecutive` groups
of k neighbours, `Orthogonal` groups {i, i+m, i+2m, ...} with m = N/k, `None` every replica
alone. The reduction is the `__collectiveOperator` annotation (Add by default).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator

import tensorflow as tf

from openipu._src.engine.replicas import exchange_ops, lockstep
from openipu._src.popart.builder import annotation_names
from openipu._src.popart.builder.enums import CollectiveOperator, CommGroupType
from openipu._src.popart.errors import LoweringError
from openipu._src.popart.lowering.op import Op, decode_attribute
from openipu._src.popart.lowering.ops.ai_graphcore import graphcore_op

# The replica count a graph built outside replicated building stands for: a session working
# out its tensors' shapes traces one replica's graph, whose reduce-scatter slices depend on it.
_SHAPE_REPLICAS: contextvars.ContextVar[int] = contextvars.ContextVar("shape_replicas", default=1)


@contextlib.contextmanager
def replicas_for_shapes(count: int) -> Iterator[None]:
    """Graphs built within, outside replicated building, stand for one of `count` replicas."""
    token = _SHAPE_REPLICAS.set(count)
    try:
        yield
    finally:
        _SHAPE_REPLICAS.reset(token)


def _replica_count() -> int:
    count = lockstep.replica_count()
    return count if lockstep.current() is not None else _SHAPE_REPLICAS.get()


def _sum(values: list[tf.Tensor]) -> tf.Tensor:
    return tf.add_n(values)


def _folded(
    op: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
) -> Callable[[list[tf.Tensor]], tf.Tensor]:
    def fold(values: list[tf.Tensor]) -> tf.Tensor:
        result = values[0]
        for value in values[1:]:
            result = op(result, value)
        return result

    return fold


def _logical(
    op: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
) -> Callable[[list[tf.Tensor]], tf.Tensor]:
    def reduce(values: list[tf.Tensor]) -> tf.Tensor:
        result = _folded(op)([tf.cast(v, tf.bool) for v in values])
        return tf.cast(result, values[0].dtype)

    return reduce


_REDUCTIONS: dict[CollectiveOperator, Callable[[list[tf.Tensor]], tf.Tensor]] = {
    CollectiveOperator.Add: _sum,
    CollectiveOperator.Mean: lambda values: (
        tf.add_n(values) / tf.cast(len(values), values[0].dtype)
    ),
    CollectiveOperator.Mul: _folded(tf.multiply),
    CollectiveOperator.Min: _folded(tf.minimum),
    CollectiveOperator.Max: _folded(tf.maximum),
    CollectiveOperator.LogicalAnd: _logical(tf.logical_and),
    CollectiveOperator.LogicalOr: _logical(tf.logical_or),
    CollectiveOperator.SquareAdd: lambda values: tf.add_n([v * v for v in values]),
    CollectiveOperator.Local: lambda values: values[0],
}


def replica_groups(group_type: CommGroupType, group_size: int, count: int) -> list[list[int]]:
    """The groups of `count` replicas a comm group forms (commgroup.hpp)."""
    if group_type is CommGroupType.All or count == 1:
        return [list(range(count))]
    if group_type is CommGroupType.Ungrouped:
        return [[replica] for replica in range(count)]
    if group_size <= 0 or count % group_size:
        raise LoweringError(
            f"commGroup: a replica group size of {group_size} does not divide the {count} replicas"
        )
    if group_type is CommGroupType.Consecutive:
        return [list(range(start, start + group_size)) for start in range(0, count, group_size)]
    stride = count // group_size  # Orthogonal: m groups, members m apart
    return [list(range(first, count, stride)) for first in range(stride)]


class _Collective(Op):
    def setup(self) -> None:
        annotations = {a.name: decode_attribute(a) for a in self.node.attribute}
        encoded = annotations.get(annotation_names.COLLECTIVE_COMM_GROUP, [0, 0])
        self.group_type = CommGroupType(int(encoded[0]))
        self.group_size = int(encoded[1])
        operator = annotations.get(annotation_names.COLLECTIVE_OPERATOR, 0)
        self.operator = CollectiveOperator(int(operator))

    def _exchange(
        self, x: tf.Tensor, per_member: Callable[[tf.Tensor, int, int], tf.Tensor]
    ) -> tf.Tensor:
        """Each replica's `per_member(reduced, position in its group, group size)`."""
        reduce = _REDUCTIONS[self.operator]

        def combine(values: list[tf.Tensor]) -> list[tf.Tensor]:
            results: list[tf.Tensor] = [values[0]] * len(values)
            for group in replica_groups(self.group_type, self.group_size, len(values)):
                reduced = reduce([values[r] for r in group])
                for position, replica in enumerate(group):
                    results[replica] = per_member(reduced, position, len(group))
            return results

        return lockstep.exchange(x, combine, f"a {self.op_type}")

    def _plain_sum_group(self) -> int | None:
        """The group size when the collective is a sum over consecutive replicas (or all of
        them), which the engine's differentiable cross-replica sum does."""
        count = lockstep.replica_count()
        if self.operator is not CollectiveOperator.Add:
            return None
        if self.group_type is CommGroupType.All:
            return count
        if self.group_type is CommGroupType.Consecutive and self.group_size > 0:
            return self.group_size if count % self.group_size == 0 else None
        return None


@graphcore_op("ReplicatedAllReduce")
class ReplicatedAllReduce(_Collective):
    """Every replica gets the reduction of its group's values."""

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        if lockstep.replica_count() == 1:
            return tf.identity(x)
        group = self._plain_sum_group()
        if group is not None:
            return exchange_ops.replica_sum(x, group)
        return self._exchange(x, lambda reduced, _position, _size: reduced)


@graphcore_op("ReplicatedReduceScatter")
class ReplicatedReduceScatter(_Collective):
    """The flattened reduction of the group's values, zero-padded to a multiple of the group
    size; replica i of a group gets the i-th of its equal slices (replicatedreducescatter.cpp:
    ceil(elements / group size) elements each)."""

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        def slice_of(reduced: tf.Tensor, position: int, size: int) -> tf.Tensor:
            flat = tf.reshape(reduced, [-1])
            elements = flat.shape.num_elements()
            if elements is None:
                raise LoweringError(f"{self.op_type} needs a tensor of known size")
            chunk = math.ceil(elements / size)
            flat = tf.pad(flat, [[0, chunk * size - elements]])
            return flat[position * chunk : (position + 1) * chunk]

        if lockstep.current() is None:
            # One replica's graph (a session tracing shapes): replica 0's slice.
            groups = replica_groups(self.group_type, self.group_size, _replica_count())
            return slice_of(x, 0, len(groups[0]))
        return self._exchange(x, slice_of)
