"""Replica groups and reductions shared by the collective operators.

Replicas built by the engine's lock-step replication (`engine.replicas`) exchange
values through `exchange_ops`; a program spanning processes numbers its replicas
globally (process index * local replicas + local index) and its exchanges reach
every process. Replicas of a stock tf.distribute strategy (a `MirroredStrategy`):
inside a replica function, the replica context says which replica this is and
offers `all_reduce` and `all_gather`, the only communication the collectives use,
so their gradients are tf.distribute's (an all-reduce's gradient is an all-reduce).
Outside any replica context there is one replica, and every collective over it
is the identity, except in a plain TF1 `ipu_scope` (`plain_ipu_scope`), whose replicas
are the device's IPUs and are computed as identical.

A collective with group size k splits the R replicas into consecutive groups
{0..k-1}, {k..2k-1}, ...; R must be a multiple of k (rule E59: the original
failed while compiling).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import weakref
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.util import nest

from openipu._src.compiler import scopes
from openipu._src.engine import deferred_builds, device_scope, region
from openipu._src.engine.replicas import exchange_ops, lockstep, processes
from openipu._src.int_like import as_attr_int
from openipu._src.system import configure

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
    #: This replica's value stands for every replica's: in a provisional build
    #: (`engine/deferred_builds.py`), so that the collectives have their shapes until the
    #: real build, and in a plain TF1 ipu_scope, whose replicas are identical.
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
    plain = plain_ipu_scope()
    if plain is not None:
        if plain.replica_count is not None:
            return plain.replica_count
        # Known at the first run, when `collective_builder` builds the op again.
        if deferred_builds.current_attempt() is None:
            raise RuntimeError(
                "internal error: an op that needs the replica count of a plain ipu_scope was "
                "built before the configuration without `collectives.collective_builder`"
            )
        deferred_builds.uses_stand_in()
        return 1
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
    return ReplicaGroup(count, group_size, stand_in=plain_ipu_scope() is not None)


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
    plain = plain_ipu_scope()
    if plain is not None:
        _refuse_values_differing_between_replicas(x, plain)
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


# -- Plain TF1 ipu_scopes ----------------------------------------------------------------
#
# In a TF1 graph, the original clusters the ops of an `ipu_scope` (or of a device scope
# naming an IPU) built outside `ipu_compiler.compile` into one XLA computation, which Poplar
# replicates over the device's IPUs, one replica per IPU, every replica fed the same host
# values; a fetched tensor is replica 0's (tensorflow/python/ipu/tests/
# replicated_seed_control_test.py, replication_normalise_test.py). openipu computes that
# cluster once, as replica 0: the other replicas compute the same values from the same
# feeds, so a collective over k of them combines k copies of this replica's value (a
# stand-in group). Values that differ between the replicas would make that wrong: a
# collective over them is refused.


@dataclasses.dataclass(frozen=True)
class PlainScope:
    """The replicas of a plain TF1 ipu_scope on `/device:IPU:<ordinal>`, as configured now."""

    ordinal: int
    #: The device's IPUs (one replica each); None while the system is not configured.
    replica_count: int | None
    #: Whether the replicas' random operations differ: they do on the IPU unless
    #: `experimental.enable_prng_stability` is on (None while not configured).
    random_differs: bool | None


def plain_ipu_scope() -> PlainScope | None:
    """The plain TF1 ipu_scope being built in; None in eager code, a function, a compiled
    program (`ipu_compiler.compile`, a device loop, `IPUStrategy.run`: a compiled region),
    replicas of the engine or of tf.distribute, or outside any ipu_scope."""
    if tf.executing_eagerly() or ops.get_default_graph().building_function:
        return None
    ordinal = device_scope.scoped_ipu_ordinal()
    if ordinal is None or region.current_region() is not None:
        return None
    if _on_engine_replicas() or _slot_count() > 1:
        return None
    return _plain_scope_on(ordinal)


def _plain_scope_on(ordinal: int) -> PlainScope:
    system = configure.maybe_current_system()
    if system is None:
        return PlainScope(ordinal, None, None)
    random_differs = not system.config.experimental.enable_prng_stability
    return PlainScope(ordinal, system.device(ordinal).num_ipus, random_differs)


_Params = ParamSpec("_Params")
_Result = TypeVar("_Result")


def collective_builder(
    differs_between_replicas: bool = False,
) -> Callable[[Callable[_Params, _Result]], Callable[_Params, _Result]]:
    """Decorates the builder of an operator that depends on the replicas.

    In a plain TF1 ipu_scope built before the system is configured, the replicas are known
    at the graph's first session run: the operator is built now provisionally and again
    then (`engine/deferred_builds.py`), as `ipu_compiler.compile` programs are; a group size
    that does not divide them fails there with the original's InvalidArgumentError
    (`replica_group`). With `differs_between_replicas` (the replica's index) the outputs
    built in a plain ipu_scope are remembered as differing between its replicas, which its
    collectives refuse.
    """

    def decorate(builder: Callable[_Params, _Result]) -> Callable[_Params, _Result]:
        @functools.wraps(builder)
        def build(*args: _Params.args, **kwargs: _Params.kwargs) -> _Result:
            plain = plain_ipu_scope()
            if plain is None:
                return builder(*args, **kwargs)

            def build_in_plain_scope() -> _Result:
                outputs = builder(*args, **kwargs)
                if differs_between_replicas:
                    _differing_ops.update(
                        value.op for value in nest.flatten(outputs) if isinstance(value, tf.Tensor)
                    )
                return outputs

            # Within a deferred build (an enclosing builder's) the op is built with it.
            if deferred_builds.current_attempt() is None and deferred_builds.is_deferred_here():
                return _built_again_at_first_run(build_in_plain_scope, plain)
            return build_in_plain_scope()

        return build

    return decorate


def _built_again_at_first_run(build: Callable[[], _Result], plain: PlainScope) -> _Result:
    graph = ops.get_default_graph()
    name_scope = graph.get_name_scope()
    flow_context = graph._get_control_flow_context()  # noqa: SLF001 - a v1 cond or while
    built_once: list[bool] = []

    def build_for_configuration() -> _Result:
        if not built_once:
            built_once.append(True)
            return build()
        # At the first run, in the scopes it was first built in (as
        # `ipu_compiler._built_before_configuration`), on the configured device's host device.
        with (
            ops.name_scope(f"{name_scope}/" if name_scope else None),
            scopes.ipu_scope(f"/device:IPU:{plain.ordinal}"),
            _control_flow_context(graph, flow_context),
        ):
            return build()

    def needs_rebuild() -> bool:
        return _plain_scope_on(plain.ordinal) != plain

    result: _Result = deferred_builds.build_deferred(build_for_configuration, needs_rebuild)
    return result


@contextlib.contextmanager
def _control_flow_context(graph: tf.Graph, context: object) -> Iterator[None]:
    saved = graph._get_control_flow_context()  # noqa: SLF001 - no public way to re-enter it
    graph._set_control_flow_context(context)  # noqa: SLF001
    try:
        yield
    finally:
        graph._set_control_flow_context(saved)  # noqa: SLF001


#: Outputs of `differs_between_replicas` builders in plain ipu_scopes (the replica's index).
_differing_ops: weakref.WeakSet[tf.Operation] = weakref.WeakSet()

#: TensorFlow's stateful random operations: on the IPU each replica draws its own numbers.
_STATEFUL_RANDOM_OPS = frozenset(
    {
        "RandomUniform",
        "RandomUniformInt",
        "RandomStandardNormal",
        "TruncatedNormal",
        "ParameterizedTruncatedNormal",
        "RandomGamma",
        "RandomPoisson",
        "RandomPoissonV2",
        "RandomShuffle",
        "Multinomial",
        "StatefulUniform",
        "StatefulUniformInt",
        "StatefulUniformFullInt",
        "StatefulStandardNormalV2",
        "StatefulTruncatedNormal",
        "StatefulRandomBinomial",
    }
)


def _refuse_values_differing_between_replicas(x: tf.Tensor, plain: PlainScope) -> None:
    """Raises NotImplementedError if `x` is computed from a value that differs between the
    replicas of the plain ipu_scope `plain`: openipu would combine wrong values."""
    differing = _first_differing_op(x.op, plain)
    if differing is None:
        return
    raise NotImplementedError(
        "A collective across the replicas of a plain ipu_scope (outside "
        f"ipu_compiler.compile) combines a value computed from {differing.name} "
        f"({differing.type}), which differs between the replicas. openipu computes the "
        "replicas of a plain ipu_scope as identical, so it cannot gather or reduce values "
        "that differ between them: build this computation with ipu_compiler.compile."
    )


def _first_differing_op(op: tf.Operation, plain: PlainScope) -> tf.Operation | None:
    """The first op found among `op` and the ops its inputs come from that differs between
    the replicas."""
    pending = [op]
    seen = {op}
    while pending:
        current = pending.pop()
        if current in _differing_ops or (plain.random_differs and _random_on_an_ipu(current)):
            return current
        for value in current.inputs:
            if value.op not in seen:
                seen.add(value.op)
                pending.append(value.op)
    return None


def _random_on_an_ipu(op: tf.Operation) -> bool:
    """A stateful random op in an ipu_scope (its JIT scope, `scopes.ipu_jit_scope`); those
    built on the host draw once, their numbers fed to every replica alike."""
    if op.type not in _STATEFUL_RANDOM_OPS:
        return False
    try:
        jit_scope = op.get_attr("_XlaScope")
    except ValueError:
        return False
    return jit_scope.startswith(b"jit_scope_ipu_")
