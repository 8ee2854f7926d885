"""Building a program's R replicas: lock-step threads, each with its own variable copies.

`build(fn, R)` is what the engine calls where a compiled program's replicated part
starts (a region's body, one step of a program): it returns `fn(r)` for every
replica r. Replicated parts nested in it (the body of a device loop shared by the
replicas) reuse the outer part's variable copies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import tensorflow as tf
from tensorflow.python.framework import func_graph, ops
from tensorflow.python.util import nest

from openipu._src.engine import random_ops
from openipu._src.engine.replicas import abandoned_build, lockstep, processes
from openipu._src.engine.replicas.layout import ReplicaLayout
from openipu._src.engine.replicas.variable_copies import ReplicatedVariables

_state = threading.local()
T = TypeVar("T")


class TooManyReplicas(Exception):
    """The program needs more IPUs per replica than the replica count assumed.

    A program's IPUs per replica are known only once it is built (a pipeline says
    how many IPUs it spans); the builder catches this and builds again with
    `ipus // ipus_per_replica` replicas.
    """

    def __init__(self, ipus_per_replica: int) -> None:
        super().__init__(f"the program needs {ipus_per_replica} IPUs per replica")
        self.ipus_per_replica = ipus_per_replica


def build(
    fn: Callable[[int], Any],
    count: int,
    ipus: int | None = None,
    ipu_ordinal: int | None = None,
) -> list[Any]:
    """`[fn(0), ..., fn(count - 1)]`, each built as one replica of the program.

    `ipus` is how many IPUs the program's device has (see `require_ipus_per_replica`);
    `ipu_ordinal` names the device whose seed streams (one per replica) random ops use.
    Nested builds inherit both from the outer one.
    """
    if count == 1:
        # One replica per process: the others' processes draw from their own streams.
        offset = processes.index()
        if offset == 0 or ipu_ordinal is None:
            return lockstep.run_replicas(fn, 1)
        with _seeded(ipu_ordinal, offset):
            return lockstep.run_replicas(fn, 1)
    return _replicas(
        lambda run: lockstep.run_replicas(lambda r: run(r, None), count),
        lambda index, _: fn(index),
        count,
        ipus,
        ipu_ordinal,
    )


def build_once(
    fn: Callable[[int, Any], Any],
    count: int,
    per_replica_inputs: list[Any] | None = None,
    ipus: int | None = None,
    ipu_ordinal: int | None = None,
    layout: ReplicaLayout | None = None,
) -> list[Any]:
    """Every replica's `fn(index, inputs)`, the Python traced once (replica 0's) when it can.

    As `build`, but `fn` depends on its replica only through `per_replica_inputs[r]`
    (tensors built before, outside the replicas) and what the engine maps per replica
    (variables, seeds, the replica index): the original traces a replicated program's
    Python once (`lockstep.run_traced_once`). `index` is the replica whose Python runs.
    A `layout` learns how many replicas the program got (fewer if a pipeline in it
    spans several IPUs: see `require_ipus_per_replica`).
    """
    if count == 1:
        inputs = per_replica_inputs[0] if per_replica_inputs is not None else None
        return build(lambda r: fn(r, inputs), 1, ipus, ipu_ordinal)
    return _replicas(
        lambda run: lockstep.run_traced_once(run, count, per_replica_inputs),
        fn,
        count,
        ipus,
        ipu_ordinal,
        layout,
    )


_INHERITED = ("variables", "ipus", "ordinal")


def _replicas(
    run_all: Callable[[Callable[[int, Any], Any]], list[Any]],
    fn: Callable[[int, Any], Any],
    count: int,
    ipus: int | None,
    ipu_ordinal: int | None,
    layout: ReplicaLayout | None = None,
) -> list[Any]:
    """`run_all(in_replica)`, `in_replica(r, inputs)` building `fn(r, inputs)` as replica r.

    Each replica has its own variable copies (those of the outermost build) and seed stream.
    """
    outer: ReplicatedVariables | None = getattr(_state, "variables", None)
    variables = outer or ReplicatedVariables(count, ops.get_default_graph())
    ipus = ipus if ipus is not None else getattr(_state, "ipus", None)
    ordinal = ipu_ordinal if ipu_ordinal is not None else getattr(_state, "ordinal", None)
    # Seeds follow the global replica, alike in one process or several.
    first_stream = processes.index() * count

    def in_replica(index: int, inputs: Any) -> Any:
        previous = tuple(getattr(_state, name, None) for name in _INHERITED)
        _state.variables, _state.ipus, _state.ordinal = variables, ipus, ordinal
        try:
            if ordinal is not None:
                # Traced once: replica r's copies draw from stream first + r.
                random_ops.register_replica_streams(ordinal, first_stream)
            with variables.replica(index), _seeded(ordinal, first_stream + index):
                return fn(index, inputs)
        finally:
            for name, value in zip(_INHERITED, previous, strict=True):
                setattr(_state, name, value)

    shrinkable = _Shrinkable(layout, variables) if outer is None and layout else None
    previous = getattr(_state, "shrinkable", None)
    _state.shrinkable = shrinkable
    try:
        results = run_all(in_replica)
    finally:
        _state.shrinkable = previous
    if outer is None:
        variables.finish()
    return results


def traced_once_or_each(attempt: Callable[[], T]) -> T:
    """`attempt()`, built again with one Python trace per replica if it cannot be traced once.

    `attempt` builds a whole program (a fresh function or region) whose replicas are
    built by `build_once`; see `lockstep.TraceEachReplica`.
    """
    if lockstep.traces_each_replica():
        return attempt()
    graph = None if tf.executing_eagerly() else ops.get_default_graph()
    before = len(graph.get_operations()) if graph is not None else 0
    collections = abandoned_build.snapshot()
    try:
        return attempt()
    except Exception as error:  # noqa: BLE001 - autograph re-raises it as its own error
        if not must_trace_each_replica(error):
            raise
        if graph is not None and _leaves_stateful_ops(graph, before):
            # The abandoned trace would run with the function: whoever made the function
            # builds it again (IPUStrategy.run, LoopProgram), or the user sees why.
            raise lockstep.TraceEachReplica(
                f"{error} (in a function traced around the program, which cannot be built "
                "again with one trace per replica: call IPUStrategy.run outside tf.function, "
                "or keep per-replica Python out of functions nested in the replicated code)"
            ) from error
    collections.restore()
    with lockstep.tracing_each_replica():
        return attempt()


def _leaves_stateful_ops(graph: ops.Graph, before: int) -> bool:
    """Whether the ops built since `before` in a function graph include stateful ones.

    A TF2 function runs every stateful op it holds; a TF1 graph runs what is fetched.
    """
    if not isinstance(graph, func_graph.FuncGraph):
        return False
    return any(op._is_stateful for op in graph.get_operations()[before:])  # noqa: SLF001


def must_trace_each_replica(error: BaseException) -> bool:
    """Whether `error` says a program must be built with one Python trace per replica."""
    return cause(error, lockstep.TraceEachReplica) is not None


def _seeded(ipu_ordinal: int | None, replica: int) -> contextlib.AbstractContextManager[None]:
    """Each replica draws from its own seed stream of the device, as on the IPU."""
    if ipu_ordinal is None:
        return contextlib.nullcontext()
    return random_ops.seeded_from_device(ipu_ordinal, replica)


def first_replica_outputs(
    fn: Callable[[Any], Any],
    count: int,
    ipus: int,
    ipu_ordinal: int | None = None,
    per_replica_inputs: list[Any] | None = None,
    layout: ReplicaLayout | None = None,
) -> Any:
    """`fn(inputs)` for every replica (`build_once`); replica 0's outputs, waiting for the others.

    Only replica 0's outputs reach the host, as on the IPU (the original's
    poplar_executor.cc copies replica 0's output buffers); the other replicas' work
    runs because replica 0's outputs depend on it.
    """
    outputs = build_once(
        lambda _, inputs: fn(inputs), count, per_replica_inputs, ipus, ipu_ordinal, layout
    )
    if count == 1:
        return outputs[0]
    others = [
        value
        for output in outputs[1:]
        for value in nest.flatten(output)
        if isinstance(value, (tf.Tensor, tf.Operation))
    ]
    if not others:
        return outputs[0]
    with tf.control_dependencies(others):
        done = tf.no_op(name="replicas_done")
    return _after(outputs[0], done)


def _after(outputs: Any, done: tf.Operation) -> Any:
    """`outputs` (replica 0's) made to wait for `done` (every other replica's work)."""
    if outputs is None:
        return done
    if isinstance(outputs, tf.Operation):
        return tf.group(outputs, done)

    def wait(value: object) -> object:
        if isinstance(value, tf.Operation):
            return tf.group(value, done)
        if not isinstance(value, tf.Tensor):
            return value
        with tf.control_dependencies([done]):
            return tf.identity(value)

    return nest.map_structure(wait, outputs)


def with_replica_count(ipus: int, attempt: Callable[[int], T], device_name: str) -> T:
    """`attempt(R)` with as many replicas as the device's IPUs allow.

    A program first assumes one IPU per replica; when building it finds that a
    replica spans k IPUs (`TooManyReplicas`), it is built again with `ipus // k`
    replicas (the original's poplar_compiler.cc: replication factor = IPUs / shards).
    """
    ipus_per_replica = 1
    collections = abandoned_build.snapshot()
    while True:
        try:
            return attempt(max(1, ipus // ipus_per_replica))
        except Exception as error:  # noqa: BLE001 - autograph re-raises it as its own error
            retry = _too_many_replicas(error)
            if retry is None:
                raise
            collections.restore()
            if ipus % retry.ipus_per_replica:
                raise shards_do_not_divide(ipus, retry.ipus_per_replica, device_name) from None
            if retry.ipus_per_replica <= ipus_per_replica:
                raise
            ipus_per_replica = retry.ipus_per_replica


def shards_do_not_divide(ipus: int, shards: int, device_name: str = "") -> tf.errors.InternalError:
    """The original's compiler refuses shards (rounded up to a power of two) that do not
    divide the device's IPUs, with an InternalError (poplar_compiler.cc)."""
    where = f" (device {device_name})" if device_name else ""
    return tf.errors.InternalError(
        None,
        None,
        f"Trying to compile a graph for an IPU device with {ipus} IPUs and {shards} shards. "
        f"The number of shards needs to divide the number of IPUs{where}.",
    )


def _too_many_replicas(error: BaseException | None) -> TooManyReplicas | None:
    """The `TooManyReplicas` behind `error` (autograph raises its own, the original as context)."""
    return cause(error, TooManyReplicas)


E = TypeVar("E", bound=BaseException)


def cause(error: BaseException | None, kind: type[E]) -> E | None:
    """The `kind` error behind `error` (autograph raises its own, the original as context)."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, kind):
            return error
        error = error.__cause__ or error.__context__
        seen += 1
    return None


def require_ipus_per_replica(count: int) -> None:
    """Called by code that spans `count` IPUs (a pipeline): too many replicas go on as
    fewer if nothing depended on their count yet (`layout.py`), else are rebuilt."""
    # The original's compiler gives a replica the shards' IPUs rounded up to a power of two
    # (poplar_compiler.cc `NumIPUsInShards`): 3 shards take 4 IPUs.
    count = 1 << max(0, count - 1).bit_length()
    replica = lockstep.current()
    replicas = 1 if replica is None else replica.count
    ipus = getattr(_state, "ipus", None)
    if ipus is not None and ipus % count:
        raise shards_do_not_divide(ipus, count)
    if replicas > 1 and ipus is not None and replicas * count > ipus:
        if _shrunk(max(1, ipus // count)):
            return
        raise TooManyReplicas(count)


def _shrunk(count: int) -> bool:
    """Whether the program being built goes on with `count` replicas, in place."""
    shrinkable: _Shrinkable | None = getattr(_state, "shrinkable", None)
    if shrinkable is None or shrinkable.variables.touched or processes.count() > 1:
        return False
    if not lockstep.shrink_in_place(count):
        return False
    shrinkable.variables.shrink(count)
    shrinkable.layout.replicas = count
    return True


@dataclasses.dataclass(frozen=True)
class _Shrinkable:
    """The outermost replicated build of a program whose replicas may become fewer."""

    layout: ReplicaLayout
    variables: ReplicatedVariables
