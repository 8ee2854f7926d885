"""R replicas of one program, traced in lock-step: the engine's replication.

On an IPU, replication is a property of the compiled program: Poplar runs R copies
of it, each with its own variables and data, which meet only in collectives (a
cross-replica sum, an all-gather) and in the device loop they share. From
tf.distribute's view an `IPUStrategy` has one replica
(tensorflow/python/ipu/ipu_strategy.py: `num_replicas_in_sync` is 1).

The engine builds the R copies into one graph. A program's Python is traced once
(`run_traced_once`, `traced_once.py`: replica 0 runs it, the others are copies of its
ops made at each meeting). `run_replicas(fn, R)` (and the fallback of a program that
cannot be traced once, `TraceEachReplica`) traces `fn` once per replica, each in a
thread of its own, and the threads take turns: one builds
until it reaches a meeting point (`exchange`) or ends, then the next. When every
replica has reached the same meeting point, the last one builds what combines their
values (a sum, a stack, one shared loop) and each replica goes on with its share.
So ops are built by one thread at a time, replicas meet in the order they call
collectives, and the R copies compile into one XLA computation.

TensorFlow keeps graph-building state per thread (the default graph, name scopes,
control dependencies, the distribution strategy stack, eager mode); each replica
thread starts with the caller's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import tensorflow as tf
from tensorflow.python.distribute import mirrored_run
from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.ops import variable_scope
from tensorflow.python.util import nest

from openipu._src.engine import thread_state
from openipu._src.engine.replicas import traced_once

_state = threading.local()


class ReplicaDivergenceError(RuntimeError):
    """Replicas of one program did not meet at the same collectives."""


class TraceEachReplica(Exception):
    """A program traced once cannot be: it is built again with one Python trace per replica.

    Raised where replica 0's ops cannot be copied for the others (`traced_once`); the
    builders of whole programs catch it (`replicated.traced_once_or_each`).
    """


@dataclasses.dataclass(frozen=True)
class ReplicaContext:
    """The replica being built: its index among `count`, and the group building them."""

    index: int
    count: int
    group: _ReplicaGroup | traced_once.TracedOnceGroup


def current() -> ReplicaContext | None:
    """The replica the calling thread builds, or None outside replicated building."""
    return getattr(_state, "replica", None)


def replica_index() -> int:
    """The index of the replica being built, for Python that depends on it.

    In a program traced once, replica 0's Python stands for every replica: reading the
    index there (outside a per-replica call, `per_replica`) makes the program be built
    again with one trace per replica.
    """
    replica = current()
    if replica is None:
        return 0
    group = replica.group
    if isinstance(group, traced_once.TracedOnceGroup) and group.replaying is None:
        if not group.calling:
            group.must_trace_each = True
            raise TraceEachReplica(
                "engine code read the replica index in Python while the replicas' Python "
                "was traced once"
            )
    return replica.index


def tracing_replica() -> int:
    """The replica whose Python runs: 0 in a program traced once (it stands for all)."""
    replica = current()
    if replica is None:
        return 0
    if isinstance(replica.group, traced_once.TracedOnceGroup):
        return 0 if replica.group.replaying is None else replica.index
    return replica.index


def replica_count() -> int:
    replica = current()
    if replica is None:
        return 1
    if isinstance(replica.group, traced_once.TracedOnceGroup):
        replica.group.count_read = True  # the count can no longer change in place
    return replica.count


def shrink_in_place(count: int) -> bool:
    """Builds the program being traced once with `count` replicas from now on, if nothing
    depended on its replica count yet (see `layout.py`); whether it could."""
    replica = current()
    if replica is None or not isinstance(replica.group, traced_once.TracedOnceGroup):
        return False
    group = replica.group
    if getattr(_state, "enclosing", None) is not None or not group.may_shrink():
        return False
    group.shrink(count)
    # One replica is no replica: the program goes on as one built without replication.
    _state.replica = ReplicaContext(0, count, group) if count > 1 else None
    return True


def run_replicas(fn: Callable[[int], Any], count: int) -> list[Any]:
    """Builds `fn(r)` for each replica r in lock-step; returns their results in order.

    With one replica `fn(0)` runs in the calling thread.
    """
    if count == 1:
        with replica_scope(None):
            return [fn(0)]
    return _ReplicaGroup(count).run(fn)


@traced_once.not_converted  # as the threads: the caller converts `fn` itself
def run_traced_once(
    fn: Callable[[int, Any], Any], count: int, per_replica_inputs: Sequence[Any] | None = None
) -> list[Any]:
    """Every replica's `fn(index, inputs)`, the Python traced once when it can be.

    `per_replica_inputs[r]` are replica r's inputs (tensors built before, outside the
    replicas: the replica's own loop values, its share of an infeed). The program's
    Python runs once, as replica 0 (`traced_once`), unless it is built with one trace per
    replica (`tracing_each_replica`, or replicas nested in replicas traced each), where
    `fn(r, per_replica_inputs[r])` runs in lock-step threads as `run_replicas`.
    """
    inputs = list(per_replica_inputs) if per_replica_inputs is not None else [None] * count
    if count == 1:
        with replica_scope(None):
            return [fn(0, inputs[0])]
    enclosing = getattr(_state, "enclosing", None)
    traced_each = traces_each_replica() or (
        enclosing is not None and not isinstance(enclosing, traced_once.TracedOnceGroup)
    )
    if traced_each:
        return _ReplicaGroup(count).run(lambda r: fn(r, inputs[r]))
    group = traced_once.TracedOnceGroup(count, per_replica_inputs, enclosing)
    with replica_scope(ReplicaContext(0, count, group)):
        result = fn(0, inputs[0])
    if group.must_trace_each:  # the signal was caught on its way (by user code)
        raise TraceEachReplica("the replicas' Python could not be traced once")
    return group.finish(result)


def traces_each_replica() -> bool:
    """Whether programs built now trace their Python once per replica (the fallback)."""
    return bool(getattr(_state, "trace_each", False))


@contextlib.contextmanager
def tracing_each_replica() -> Iterator[None]:
    """Programs built within trace their Python once per replica, in lock-step threads."""
    previous = getattr(_state, "trace_each", False)
    _state.trace_each = True
    try:
        yield
    finally:
        _state.trace_each = previous


def recording() -> traced_once.TracedOnceGroup | None:
    """The group traced once whose replica 0 is being built here, if any."""
    replica = current()
    if replica is None or not isinstance(replica.group, traced_once.TracedOnceGroup):
        return None
    group = replica.group
    return group if group.replaying is None and not group.calling else None


def per_replica(builder: Callable[[int, Any], Any], inputs: Any = None) -> Any:
    """`builder(index, inputs)` for the replica being built: Python that depends on it.

    In a program traced once it runs for replica 0 and again for every other replica,
    with that replica's counterparts of `inputs`, when its copy is made.
    """
    group = recording()
    if group is None:
        return builder(replica_index(), inputs)
    if ops.get_default_graph() is not group.graph:
        # Inside a function nested in the program (a tf.cond branch, a loop body that is
        # not a device loop), whose body every replica's copy shares.
        if any(isinstance(t, (tf.Tensor, ops.Operation)) for t in nest.flatten(inputs)):
            group.must_trace_each = True
            raise TraceEachReplica(
                "per-replica Python inside a function nested in a program traced once"
            )
        # A value of the replica's own (its index): made in the program, captured here.
        with group.graph.as_default():
            return group.call(builder, inputs)
    return group.call(builder, inputs)


def register(tensor: Any, builder: Callable[[int], Any], variable: bool = False) -> None:
    """In a program traced once, replica r's counterpart of `tensor` is `builder(r)`.

    A `variable` handle's counterpart is used where variables resolve to the replica's
    copies (see `untouched`).
    """
    group = recording()
    if group is not None:
        group.register(tensor, builder, variable)


@contextlib.contextmanager
def untouched() -> Iterator[None]:
    """Ops built within read variables themselves in every replica (not their copies)."""
    group = recording()
    if group is None:
        yield
        return
    with group.untouched():
        yield


def register_device(device: str, builder: Callable[[int], str]) -> None:
    """In a program traced once, replica r's copies of ops on `device` go to `builder(r)`."""
    group = recording()
    if group is not None:
        group.register_device(device, builder)


@contextlib.contextmanager
def unrecorded() -> Iterator[None]:
    """Ops built within are shared by every replica (not copied for the others)."""
    group = recording()
    if group is None:
        yield
        return
    with group.unrecorded():
        yield


def exchange(value: Any, combine: Callable[[list[Any]], Sequence[Any]], kind: str) -> Any:
    """A meeting point: every replica passes `value`; each gets its share of `combine`.

    `combine(values)` receives the R values in replica order and returns R results (one
    per replica); it runs once, in the thread of the last replica to arrive, so the ops
    it builds are built once. `kind` names the meeting (for the error when replicas call
    different collectives). Outside replicated building there is one replica.
    """
    replica = current()
    if replica is None:
        return combine([value])[0]
    group = replica.group
    if isinstance(group, traced_once.TracedOnceGroup):
        if group.replaying is not None or group.calling:
            raise AssertionError(f"{kind}: replicas cannot meet inside a per-replica call")
        return group.meet(value, combine, kind)
    return group.meet(replica.index, value, combine, kind)


@contextlib.contextmanager
def outside_replicas() -> Iterator[None]:
    """Builds what all replicas share (a loop around their bodies) as no replica's code.

    Nested replicas built there start from the variable scope replica 0 was in when it
    reached the meeting (the user's `variable_scope("ipu")` around a pipeline holds for
    its stages, as in the original's single trace), not from that of a replica thread
    r > 0 that may build the shared code (it finds variables rather than making them).
    """
    replica = current()
    scope = _first_replica_variable_scope(replica) if replica is not None else None
    previous = getattr(_state, "enclosing", None)
    _state.enclosing = replica.group if replica is not None else None
    with (
        replica_scope(None),
        variable_scope.variable_scope(scope) if scope is not None else contextlib.nullcontext(),
    ):
        try:
            yield
        finally:
            _state.enclosing = previous


def _first_replica_variable_scope(replica: ReplicaContext) -> Any:
    """The variable scope of replica 0 at the meeting under way in `replica`'s group."""
    group = replica.group
    if isinstance(group, traced_once.TracedOnceGroup):
        # Replica 0's Python runs in this thread, and only it meets.
        return variable_scope.get_variable_scope()
    return group.meeting_variable_scope()


@contextlib.contextmanager
def replica_scope(replica: ReplicaContext | None) -> Iterator[None]:
    """Within this context, the calling thread builds `replica` (None: no replica)."""
    previous = getattr(_state, "replica", None)
    _state.replica = replica
    try:
        yield
    finally:
        _state.replica = previous


@dataclasses.dataclass
class _Meeting:
    kind: str
    graph: ops.Graph
    variable_scope: Any  # replica 0's when it arrived
    values: dict[int, Any] = dataclasses.field(default_factory=dict)
    results: Sequence[Any] | None = None


class _ReplicaGroup:
    """The threads building one replicated program, and the baton they pass."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.variable_scope = variable_scope.get_variable_scope()
        self._meeting: _Meeting | None = None
        self._threads: list[_ReplicaThread] = []

    def run(self, fn: Callable[[int], Any]) -> list[Any]:
        if not context.executing_eagerly():
            # Control dependencies and device scopes must not leak between replica threads.
            ops.get_default_graph().switch_to_thread_local()
        self._threads = [_ReplicaThread(self, index, fn) for index in range(self.count)]
        for thread in self._threads:
            thread.start()
        try:
            self._drive()
        finally:
            for thread in self._threads:
                thread.stop()
        return [thread.result for thread in self._threads]

    def _drive(self) -> None:
        """Gives each replica the baton in turn until all have ended."""
        while True:
            for thread in self._threads:
                thread.resume_and_wait()
                if thread.error is not None:
                    raise thread.error
            ended = [thread.ended for thread in self._threads]
            if all(ended):
                return
            if any(ended):
                waiting = self._meeting.kind if self._meeting else "a collective"
                raise ReplicaDivergenceError(
                    f"Replicas of one program must call the same collectives in the same order: "
                    f"replica(s) {[i for i, e in enumerate(ended) if e]} ended while the others "
                    f"wait at {waiting}"
                )
            self._meeting = None  # every replica has taken its share

    def meeting_variable_scope(self) -> Any:
        """Replica 0's variable scope at the meeting under way (the caller's without one)."""
        meeting = self._meeting
        return meeting.variable_scope if meeting is not None else self.variable_scope

    def meet(
        self, index: int, value: Any, combine: Callable[[list[Any]], Sequence[Any]], kind: str
    ) -> Any:
        graph = ops.get_default_graph()
        if index == 0:
            self._meeting = _Meeting(kind, graph, variable_scope.get_variable_scope())
        meeting = self._meeting
        if meeting is None or meeting.kind != kind:
            expected = meeting.kind if meeting else "nothing"
            raise ReplicaDivergenceError(
                f"Replicas of one program must call the same collectives in the same order: "
                f"replica {index} reached {kind} where replica 0 reached {expected}"
            )
        if meeting.graph is not graph:
            raise ReplicaDivergenceError(
                f"{kind} was called inside a loop or conditional that is not a device loop: "
                "replicas can only meet at the top level of their program or of a device loop "
                "(ipu.loops.repeat, a pipeline, Keras' steps)"
            )
        meeting.values[index] = value
        if index == self.count - 1:
            results = combine([meeting.values[r] for r in range(self.count)])
            if len(results) != self.count:
                raise AssertionError(f"{kind}: combine returned {len(results)} results")
            meeting.results = results
        # Every replica, the last included, takes its share in the next round, so that
        # the next meeting starts with replica 0.
        self._threads[index].pause()
        assert meeting.results is not None
        return meeting.results[index]


class _ReplicaThread(threading.Thread):
    """Builds one replica's copy of the program, holding the baton while it runs."""

    def __init__(self, group: _ReplicaGroup, index: int, fn: Callable[[int], Any]) -> None:
        super().__init__(name=f"openipu_replica_{index}", daemon=True)
        self.group = group
        self.index = index
        self._fn = fn
        self.result: Any = None
        self.error: BaseException | None = None
        self.ended = False
        self._stopping = False
        self._may_run = threading.Event()
        self._paused = threading.Event()
        self._caller = _CallerState.capture(index, group.variable_scope)

    def resume_and_wait(self) -> None:
        if self.ended:
            return
        self._may_run.set()
        self._paused.wait()
        self._paused.clear()

    def pause(self) -> None:
        """Hands the baton back and waits for the next turn (called from this thread)."""
        self._paused.set()
        self._may_run.wait()
        self._may_run.clear()
        if self._stopping:
            raise _Stopped()

    def stop(self) -> None:
        if self.is_alive():
            self._stopping = True
            self._may_run.set()
            self.join()

    def run(self) -> None:
        self._may_run.wait()
        self._may_run.clear()
        try:
            if self._stopping:
                return
            replica = ReplicaContext(self.index, self.group.count, self.group)
            with self._caller.entered(), replica_scope(replica):
                self.result = self._fn(self.index)
        except _Stopped:
            pass
        except BaseException as error:  # noqa: BLE001 - re-raised in the calling thread
            self.error = error
        finally:
            self.ended = True
            self._paused.set()


class _Stopped(Exception):
    """Ends a replica thread whose group gave up (another replica failed)."""


@dataclasses.dataclass
class _CallerState:
    """The calling thread's graph-building state, to be entered by a replica thread."""

    graph: ops.Graph
    in_eager: bool
    init_graph: ops.Graph
    init_in_eager: bool
    name_scope: str
    variable_scope: Any
    reuse_variables: bool
    creator_stack: list[tuple[Any, ...]]  # TensorFlow's (priority, creator) entries
    strategy_stack: list[Any]  # TensorFlow's distribution strategy stack entries
    engine_stacks: list[list[Any]]

    @classmethod
    def capture(cls, index: int, scope: Any) -> _CallerState:
        graph = ops.get_default_graph()
        with ops.init_scope():
            init_in_eager = context.executing_eagerly()
            init_graph = ops.get_default_graph()
        name_scope = graph.get_name_scope()
        name_scope = f"{name_scope}/" if name_scope else ""
        if index > 0:
            name_scope += f"replica_{index}/"
        return cls(
            graph=graph,
            in_eager=context.executing_eagerly(),
            init_graph=init_graph,
            init_in_eager=init_in_eager,
            name_scope=name_scope,
            variable_scope=scope,
            # TF1 `get_variable` in replica r > 0 finds replica 0's variable (as tf.distribute's
            # mirrored replicas do); each replica then uses its own copy of it.
            reuse_variables=index > 0,
            # A replica's own variable creators stay with it (not with replicas it builds).
            creator_stack=[
                entry
                for entry in graph._variable_creator_stack  # noqa: SLF001
                if not getattr(entry[-1], "replica_only", False)
            ],
            strategy_stack=list(graph._distribution_strategy_stack),  # noqa: SLF001
            engine_stacks=thread_state.snapshot(),
        )

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        # mirrored_run's helper: the graph, and eager mode as the caller had it, so that
        # init_scope lifts variable creation to the same outer context as the caller's.
        with (
            mirrored_run._enter_graph(self.init_graph, self.init_in_eager),  # noqa: SLF001
            mirrored_run._enter_graph(self.graph, self.in_eager, self.creator_stack),  # noqa: SLF001
            thread_state.restored(self.engine_stacks),
        ):
            graph = self.graph
            graph._distribution_strategy_stack = list(self.strategy_stack)  # noqa: SLF001
            with (
                ops.name_scope(self.name_scope),
                variable_scope.variable_scope(
                    self.variable_scope, reuse=True if self.reuse_variables else None
                ),
            ):
                yield
