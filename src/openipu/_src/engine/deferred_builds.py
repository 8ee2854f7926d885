"""TF1 programs built before the IPU system is configured.

The original lets a TF1 program be built (`ipu_scope`, `ipu_compiler.compile`, feeds)
before `configure_ipu_system`: its device, and so its replica count, is known at the
first session run, when Poplar compiles it (tensorflow/python/ipu/ipu_compiler.py
builds an XLA cluster that names no device size). Here such a program is built at once
for one replica on the host device that IPU n has by default, and what it returns
reaches the user through identity ops; so do host operations that depend on the
replica count (an outfeed's dequeue) built while such a program is pending. Before a
session first runs the graph (`integration/session_run.py`), each of these builds that
differs under the configuration in force is built again, and the identities take the
new outputs. TensorFlow forbids changing operations a session has already run, so a
graph run before the system was configured cannot be finished that way: an error then
says to configure before the graph's first run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.util import nest

from openipu._src.integration import session_run
from openipu._src.system import configure, host_devices

#: Programs must be final before the engine initializes the variables they create.
BEFORE_RUN_ORDER = 0

_lock = threading.Lock()
_pending: weakref.WeakKeyDictionary[tf.Graph, list[_Deferred]] = weakref.WeakKeyDictionary()
_graphs_run: weakref.WeakSet[tf.Graph] = weakref.WeakSet()


@dataclasses.dataclass
class _Deferred:
    build: Callable[[], Any]  # builds the outputs for the configuration in force
    needs_rebuild: Callable[[], bool]  # whether the configuration changes them
    anchors: list[tf.Tensor | tf.Operation]  # identities and no-ops the user holds
    program: object  # its builds' `BuildAttempt.program`


def unconfigured_host_device(ordinal: int) -> str:
    """The host device of IPU device `ordinal` before any configuration."""
    return host_devices.host_device_for_ipu(ordinal)


def is_deferred_here() -> bool:
    """Whether what is built now must wait for the configuration.

    In a TF1 graph, while no system is configured or a program of the graph waits.
    """
    if tf.executing_eagerly() or ops.get_default_graph().building_function:
        return False
    if configure.maybe_current_system() is None:
        return True
    with _lock:
        return bool(_pending.get(ops.get_default_graph()))


@dataclasses.dataclass(frozen=True)
class BuildAttempt:
    """One build of a deferred program: `generation` 0 is the provisional one."""

    program: object  # the same for every build of one program
    generation: int


@dataclasses.dataclass
class _Building:
    attempt: BuildAttempt
    has_stand_ins: bool = False  # it holds stand-ins for what needs the configuration


_building = threading.local()


def _building_stack() -> list[_Building]:
    stack: list[_Building] = _building.__dict__.setdefault("stack", [])
    return stack


@contextlib.contextmanager
def _attempt(program: object, generation: int) -> Iterator[_Building]:
    building = _Building(BuildAttempt(program, generation))
    _building_stack().append(building)
    try:
        yield building
    finally:
        _building_stack().pop()


def current_attempt() -> BuildAttempt | None:
    """The build of a deferred program under way in this thread, if any."""
    stack = _building_stack()
    return stack[-1].attempt if stack else None


def building_provisionally() -> bool:
    """Whether a deferred program's first build, before any configuration, is under way."""
    attempt = current_attempt()
    return (
        attempt is not None and attempt.generation == 0 and configure.maybe_current_system() is None
    )


def uses_stand_in() -> None:
    """The provisional build in progress holds a stand-in for something only the configured
    system decides (such as a collective over more replicas than one): it is built again
    at the first run, whatever the configuration, and any error shows then."""
    _building_stack()[-1].has_stand_ins = True


def _always() -> bool:
    return True


def build_deferred(
    build: Callable[[], Any], needs_rebuild: Callable[[], bool], shapes_may_change: bool = False
) -> Any:
    """`build()` now; returns its outputs behind identities, to be finished at the first run.

    Before the graph's first run `needs_rebuild()` is asked (with the system configured);
    if it holds, `build()` runs again in the same graph and the identities take its outputs.
    With `shapes_may_change` (a dequeue gains a replica axis) the outputs' shapes are left
    unknown until they run.
    """
    program = object()
    with _attempt(program, 0) as provisional:
        outputs = build()
    if provisional.has_stand_ins:
        needs_rebuild = _always
    graph = ops.get_default_graph()
    anchored = nest.map_structure(
        lambda value: _anchor(value, shapes_may_change), outputs, expand_composites=False
    )
    anchors = [value for value in nest.flatten(anchored) if value is not None]
    with _lock:
        _pending.setdefault(graph, []).append(_Deferred(build, needs_rebuild, anchors, program))
    session_run.add_before_run(_finish_pending, order=BEFORE_RUN_ORDER)
    return anchored


def _anchor(value: object, shapes_may_change: bool) -> object:
    if isinstance(value, tf.Operation):
        return tf.group(value, name="deferred_program")
    if not isinstance(value, tf.Tensor):
        return value
    if shapes_may_change:
        # TensorFlow checks a new input against the shape the op's input had: make that
        # shape unknown.
        value = tf.compat.v1.placeholder_with_default(value, shape=None)
    return tf.identity(value, name="deferred_output")


def _finish_pending(session: tf.compat.v1.Session, run: Callable[..., object]) -> None:
    del run
    graph = session.graph
    configured = configure.maybe_current_system() is not None
    with _lock:
        first_run = graph not in _graphs_run
        _graphs_run.add(graph)
        # Without a configuration the builds wait; the programs run as built meanwhile.
        deferred = _pending.pop(graph, []) if configured else []
    for build in deferred:
        _finish(graph, build, first_run)


def _finish(graph: tf.Graph, deferred: _Deferred, first_run: bool) -> None:
    if not deferred.needs_rebuild():
        return
    if not first_run:
        raise RuntimeError(
            "An IPU program of this graph was built before the IPU system was configured, "
            "and the graph was run before the configuration: the configured device needs the "
            "program built again, and TensorFlow does not allow a graph to change once a "
            "session ran it. Configure the IPU system before the first session.run of the graph."
        )
    with graph.as_default(), _attempt(deferred.program, 1):
        outputs = deferred.build()
    new = [value for value in nest.flatten(outputs) if value is not None]
    for anchor, value in zip(deferred.anchors, new, strict=True):
        if isinstance(anchor, tf.Operation):
            operation = value if isinstance(value, tf.Operation) else value.op
            anchor._remove_all_control_inputs()  # noqa: SLF001 - rewiring a built graph
            anchor._add_control_input(operation)  # noqa: SLF001
        else:
            anchor.op._update_input(0, value)  # noqa: SLF001
