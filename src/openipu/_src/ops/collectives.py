"""Replica groups and reductions shared by the collective operators.

Replicas built by the engine's lock-step replication (`engine.replicas`) exchange
values through `exchange_ops`; a program spanning processes numbers its replicas
globally (process index * local replicas + local index) and its exchanges reach
every process. Replicas of a stock tf.distribute strategy (a `MirroredStrategy`):
inside a replica function, the replica context says which replica this is and
offers `all_reduce` and `all_gather`, the only communication the collectives use,
so their gradients are tf.distribute's (an all-reduce's gradient is an all-reduce).
Outside any replica context there is one replica, and every collective over it
is the identity.

A collective with group size k splits the R replicas into consecutive groups
{0..k-1}, {k..2k-1}, ...; R must be a multiple of k (rule E59: the original
failed while compiling).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from openipu._src.engine import deferred_builds
from openipu._src.engine.replicas import exchange_ops, lockstep, processes
from openipu._src.int_like import as_attr_int

#: The reductions of the `COLLECTIVE_OP_*` names, over axis 0 of a stack of operands.
_STACK_REDUCTIONS = {
    "COLLECTIVE_OP_ADD": lambda stacked: tf.reduce_sum(stacked, axis=0),
    "COLLECTIVE_OP_MEAN": lambda stacked: _mean(tf.reduce_sum(stacked, axis=0), stacked.shape[0]),
    "COLLECTIVE_OP_MUL": lambda stacked: tf.reduce_prod(stacked, axis=0),
    "COLLECTIVE_OP_MIN": lambda stacked: tf.reduce_min(stacked, axis=0),
    "COLLECTIVE_OP_MAX": lambda stacked: tf.reduce_max(stacked, axis=0),
    "COLLECTIVE_OP_LOGICAL_AND": lambda stacked: tf.reduce_all(stacked, axis=0),
    "COLLECTIVE_OP_LOGICAL_OR": lambda stacked: tf.reduce_any(stacked, axis=0),
    "COLLECTIVE_OP_SQUARE_ADD": lambda stacked: tf.reduce_sum(tf.square(stacked), axis=0),
}
COLLECTIVE_OPS = tuple(_STACK_REDUCTIONS)
_LOGICAL_OPS = ("COLLECTIVE_OP_LOGICAL_AND", "COLLECTIVE_OP_LOGICAL_OR")


def check_collective_op(op, what: str) -> str:
    """The `COLLECTIVE_OP_*` name `op` (the prefix may be left out), upper case."""
    name = op.upper() if isinstance(op, str) else None
    if name is not None and not name.startswith("COLLECTIVE_OP_"):
        name = "COLLECTIVE_OP_" + name
    if name not in _STACK_REDUCTIONS:
        raise ValueError(f"{what}: op must be one of {', '.join(COLLECTIVE_OPS)}, got {op!r}")
    return name


def check_operand_dtype(op: str, dtype: tf.DType, what: str) -> None:
    is_logical = op in _LOGICAL_OPS
    if is_logical != (dtype == tf.bool):
        wanted = "bool" if is_logical else "numeric"
        raise TypeError(f"{what}: {op} needs {wanted} tensors, got dtype {dtype.name}")


def reduce_stack(op: str, stacked: tf.Tensor) -> tf.Tensor:
    """Reduces `stacked` over axis 0 with the collective reduction `op`."""
    return _STACK_REDUCTIONS[op](stacked)


def per_replica(build: Callable[[int, Any], Any], inputs: Any = None) -> Any:
    """`build(replica index, inputs)`: what depends on the replica (among every process's).

    A program traced once builds it for each of its replicas (`lockstep.per_replica`).
    """
    if _on_engine_replicas():
        return lockstep.per_replica(
            lambda local, value: build(exchange_ops.global_index(local), value), inputs
        )
    return build(_slot_index(), inputs)


@dataclasses.dataclass(frozen=True)
class ReplicaGroup:
    """Where the replica being built sits among R replicas split into groups of k.

    Its `replica_index` (its number and position) is Python of one replica: read it in
    `per_replica` (`in_replica`), where a program traced once knows the replica.
    """

    replica_count: int
    size: int
    #: In a provisional build (`engine/deferred_builds.py`): this replica's value stands for
    #: every replica's, so that the collectives have their shapes until the real build.
    stand_in: bool = False

    @property
    def replica_index(self) -> int:
        return replica_index()

    @property
    def number(self) -> int:
        return self.replica_index // self.size

    @property
    def position(self) -> int:
        """The replica's index within its group."""
        return self.replica_index % self.size

    @property
    def group_count(self) -> int:
        return self.replica_count // self.size

    def in_replica(self, index: int) -> ReplicaGroup:
        """This group as seen by replica `index` (a global index)."""
        return _IndexedGroup(self.replica_count, self.size, self.stand_in, index)


@dataclasses.dataclass(frozen=True)
class _IndexedGroup(ReplicaGroup):
    index: int = 0

    @property
    def replica_index(self) -> int:
        return self.index


def _on_engine_replicas() -> bool:
    """Replicas of a program (possibly spanning processes), not tf.distribute's mirrored ones."""
    return lockstep.current() is not None or processes.current() is not None


def replica_count() -> int:
    """Replicas of every process the program spans."""
    if _on_engine_replicas():
        return exchange_ops.global_replica_count()
    return _slot_count()


def replica_index() -> int:
    """The replica's index among every process's replicas."""
    if _on_engine_replicas():
        return exchange_ops.global_replica_index()
    return _slot_index()


def _slot_count() -> int:
    context = tf.distribute.get_replica_context()
    return 1 if context is None else int(context.num_replicas_in_sync)


def _slot_index() -> int:
    context = tf.distribute.get_replica_context()
    if context is None:
        return 0
    replica_id = context.replica_id_in_sync_group
    if isinstance(replica_id, int):
        return replica_id
    static = tf.get_static_value(replica_id)
    if static is None:
        raise NotImplementedError(
            "IPU collectives need the replica index while the program is built, "
            "but this distribution strategy only knows it at run time"
        )
    return int(static)


def replica_group(group_size, parameter: str, what: str) -> ReplicaGroup:
    """The group of the replica being built; `group_size=None` is one group of all replicas."""
    count = replica_count()
    if group_size is None:
        group_size = count
    # An int attribute of the original's ops, which TensorFlow converts with int(): NumPy
    # ints and 2.0 work, a str is a TypeError.
    group_size = as_attr_int(group_size, f"{what}: {parameter}")
    if group_size < 1:
        raise ValueError(f"{what}: {parameter} must be a positive int, got {group_size!r}")
    if count % group_size:
        if deferred_builds.building_provisionally():
            # A TF1 program built before the configuration: its replicas are known at its
            # first run, when it is built again (the original decides them when Poplar
            # compiles, at the first run).
            deferred_builds.uses_stand_in()
            return ReplicaGroup(group_size, group_size, stand_in=True)
        message = (
            f"{what}: the {count} replicas cannot be split into groups of {parameter}="
            f"{group_size}: The replica group size (got {group_size}) does not evenly divide "
            f"the total number of replicas (got {count})"
        )
        attempt = deferred_builds.current_attempt()
        if attempt is not None and attempt.generation > 0:
            # Built at the session's first run, where the original compiles the program and
            # fails with this InvalidArgumentError and message
            # (tensorflow/python/ipu/tests/replication_grouped_collectives_test.py).
            raise tf.errors.InvalidArgumentError(None, None, message)
        raise ValueError(message)
    return ReplicaGroup(count, group_size)


def group_sum(x: tf.Tensor, group: ReplicaGroup) -> tf.Tensor:
    """The sum of `x` over the replicas of `group`, by one all-reduce."""
    if group.size == 1:
        return tf.identity(x)
    if group.stand_in:
        return tf.reduce_sum(_stand_in_gather(x, group), axis=0)
    if _on_engine_replicas():
        return exchange_ops.replica_sum(x, group.size)
    context = tf.distribute.get_replica_context()
    if group.group_count == 1:
        _check_same_shapes(x, context)
        return context.all_reduce(tf.distribute.ReduceOp.SUM, x)
    # Each group sums in its own slot of a zero buffer, so one all-reduce serves every group.
    padding = [[group.number, group.group_count - 1 - group.number]] + [[0, 0]] * x.shape.rank
    _check_same_shapes(x, context)
    slots = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.pad(x[None], padding))
    return slots[group.number]


def group_gather(x: tf.Tensor, group: ReplicaGroup) -> tf.Tensor:
    """`[k, *x.shape]`: the `x` of every replica of `group`, in replica order."""
    if group.size == 1:
        return tf.identity(x)[None]
    if group.stand_in:
        return _stand_in_gather(x, group)
    if _on_engine_replicas():
        return exchange_ops.replica_gather(x, group.size)
    context = tf.distribute.get_replica_context()
    _check_same_shapes(x, context)
    everyone = context.all_gather(x[None], axis=0)
    first = group.number * group.size
    return everyone[first : first + group.size]


def _stand_in_gather(x: tf.Tensor, group: ReplicaGroup) -> tf.Tensor:
    return tf.repeat(x[None], group.size, axis=0)


def _check_same_shapes(x: tf.Tensor, context) -> None:
    """Every replica's `x` must have one shape (else TensorFlow fails deep in its merge)."""

    def compare(strategy, values) -> None:
        shapes = [tuple(v.shape.as_list()) for v in strategy.experimental_local_results(values)]
        if len(set(shapes)) > 1:
            listed = ", ".join(f"replica {r}: {list(s)}" for r, s in enumerate(shapes))
            raise ValueError(
                "A collective across replicas needs the same shape on every replica, "
                f"but the shapes differ ({listed})"
            )

    context.merge_call(compare, args=(x,))


def group_reduce(op: str, x: tf.Tensor, group: ReplicaGroup) -> tf.Tensor:
    """`op` over the `x` of the replicas of `group`."""
    if op == "COLLECTIVE_OP_ADD":
        return group_sum(x, group)
    if op == "COLLECTIVE_OP_MEAN":
        if x.dtype in (tf.float16, tf.bfloat16):
            # Half-precision means accumulate in float32, as on the IPU: the mean of values
            # whose sum overflows float16 (4 x 65504) is still finite.
            return tf.cast(_mean(group_sum(tf.cast(x, tf.float32), group), group.size), x.dtype)
        return _mean(group_sum(x, group), group.size)
    return reduce_stack(op, group_gather(x, group))


def _mean(total: tf.Tensor, count: int) -> tf.Tensor:
    if total.dtype.is_integer:
        # Integer means truncate, like an integer division on the device.
        return tf.truncatediv(total, tf.cast(count, total.dtype))
    return total / tf.cast(count, total.dtype)
