"""Fused device loops for autograph `for _ in tf.range(n)` loops that read `tf.data` iterators.

Published IPU programs train with

    for _ in tf.range(steps):
        x, y = next(iterator)
        ...
        outfeed.enqueue(loss)

inside `IPUStrategy.run`. Stock XLA cannot compile `IteratorGetNext`, so such a
region would run as a plain graph with a host op per iteration. While a region
of a TF2 function is traced, autograph's range-loop lowering is hooked here and
such a loop becomes the device loop `loops.repeat` builds:

1. *probe*: the loop body is traced once in a throwaway function, to learn how
   many elements one iteration reads from each iterator (k) and with which
   specs. Variables the body creates on its first call (Keras weights,
   optimizer slots) are lifted out as in any `tf.function` and exist afterwards.
   Outfeed enqueues are recorded but have no effect there;
2. *host prologue*: before the region runs, the host reads the n * k elements
   the loop consumes from each iterator, in the loop's order and no more (the
   iterator may be read elsewhere too), as one stacked buffer per iterator
   (`host_stream.fetch_from_iterators`);
3. *device loop*: one `tf.while_loop` in which the j-th `next(iterator)` of
   iteration i is `buffer[i * k + j]`, and outfeed enqueues write device buffers
   that the host drains after the region (`device_loop.flat_iteration`).

The region then holds no host operation and compiles to one XLA computation.
Everything else keeps autograph's own lowering: loops inside other loops or
conditionals, trip counts the host cannot compute before the region runs,
`break`/`return` (an extra loop test), iterators read in nested control flow
or earlier in the region, and datasets whose element shapes are not fully
defined. `OPENIPU_FUSE_ITERATOR_LOOPS=0` turns the rewrite off.

The hooks replace TensorFlow functions (`integration/autograph_range_loops.py`
holds the patch), so they are installed while any region is being traced and
act only for the thread tracing it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import tensorflow as tf
from tensorflow.python.data.ops import iterator_ops
from tensorflow.python.framework import func_graph as func_graph_module
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops, control_flow_v2_func_graphs
from tensorflow.python.util import nest

from openipu._src.engine import device_loop, host_stream
from openipu._src.engine.value_types import Nested
from openipu._src.integration import autograph_range_loops

if TYPE_CHECKING:
    from openipu._src.engine.region import CompiledRegion

#: A tensor's `ref()`: what identifies an iterator handle in the dictionaries below.
HandleRef = Hashable
#: Autograph's loop callbacks (`for_stmt`): the body, the loop state's getter and setter.
LoopBody = Callable[[tf.Tensor], None]
GetState = Callable[[], tuple[Any, ...]]
SetState = Callable[[Any], None]

FUSE_ENV = "OPENIPU_FUSE_ITERATOR_LOOPS"
logger = logging.getLogger(__name__)

_state = threading.local()
UNHANDLED = object()  # a `next()` this module leaves to the iterator


def fusion_enabled() -> bool:
    return os.environ.get(FUSE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


@contextlib.contextmanager
def fusing_iterator_loops(region: CompiledRegion) -> Iterator[None]:
    """While `region` (a `CompiledRegion`) is traced, fuses the loops this module handles."""
    if not region.graph.building_function or not fusion_enabled():
        yield
        return
    rewrite = _RegionRewrite(region)
    with rewriting(rewrite):
        yield
    rewrite.finish()


class LoopRewrite(Protocol):
    """What rewrites the range loops of one program being traced (a region, an executable)."""

    def plan(
        self,
        iter_: tf.Tensor,
        extra_test: Callable[[], tf.Tensor] | None,
        body: LoopBody,
        get_state: GetState,
        set_state: SetState,
    ) -> LoopPlan | None: ...


class LoopPlan(Protocol):
    def build(
        self,
        stock_range_for_stmt: Callable[..., None],
        iter_: tf.Tensor,
        body: LoopBody,
        get_state: GetState,
        set_state: SetState,
        symbol_names: tuple[str, ...],
        opts: dict[str, Any],
    ) -> None: ...


@contextlib.contextmanager
def rewriting(rewrite: LoopRewrite) -> Iterator[None]:
    """While the tracing thread is in this context, its range loops go to `rewrite`."""
    stack = _state.__dict__.setdefault("rewrites", [])
    with autograph_range_loops.hooked(_range_for_stmt, _next_internal):
        stack.append(rewrite)
        try:
            yield
        finally:
            stack.pop()


def probing() -> bool:
    """Whether code running now is a loop body traced only to learn what it reads and writes."""
    return isinstance(_active(), _Probe)


def record_probed_enqueue(queue_name: str, structure: Nested) -> None:
    probe = _active()
    if isinstance(probe, _Probe):
        probe.enqueues[queue_name] = structure


# The hooks.


def _current_rewrite() -> LoopRewrite | None:
    stack: list[LoopRewrite] = getattr(_state, "rewrites", [])
    return stack[-1] if stack else None


def _active() -> IterationReads | None:
    stack: list[IterationReads] = getattr(_state, "bodies", [])
    return stack[-1] if stack else None


class IterationReads(Protocol):
    """A loop body being traced whose `next()` calls are answered here (or `UNHANDLED`)."""

    graph: ops.Graph | None

    def next_element(self, iterator: iterator_ops.OwnedIterator) -> Nested: ...


@contextlib.contextmanager
def body_active(body: IterationReads) -> Iterator[None]:
    stack = _state.__dict__.setdefault("bodies", [])
    stack.append(body)
    try:
        yield
    finally:
        stack.pop()


#: A class attribute, true on `OwnedIterator` subclasses read as stock iterators (the
#: iterator `iter(dataset)` gives in an IPUStrategy scope); other subclasses keep their own.
READ_AS_OWNED_ITERATOR = "_openipu_read_as_owned_iterator"


def _is_dataset_iterator(iterator: object) -> bool:
    cls = type(iterator)
    return cls is iterator_ops.OwnedIterator or bool(getattr(cls, READ_AS_OWNED_ITERATOR, False))


def _next_internal(
    stock: Callable[[iterator_ops.OwnedIterator], Nested], iterator: iterator_ops.OwnedIterator
) -> Nested:
    body = _active()
    if (
        body is not None
        and _is_dataset_iterator(iterator)
        and ops.get_default_graph() is body.graph
    ):
        element = body.next_element(iterator)
        if element is not UNHANDLED:
            return element
    elif body is None and _is_dataset_iterator(iterator):
        # A read outside any rewritten loop: the rewrite may take it (an executable's).
        outside = getattr(_current_rewrite(), "next_outside_loops", None)
        element = outside(iterator) if outside is not None else UNHANDLED
        if element is not UNHANDLED:
            return element
    return stock(iterator)


def _range_for_stmt(
    stock: Callable[..., None],
    iter_: tf.Tensor,
    extra_test: Callable[[], tf.Tensor] | None,
    body: LoopBody,
    get_state: GetState,
    set_state: SetState,
    symbol_names: tuple[str, ...],
    opts: dict[str, Any],
) -> None:
    rewrite = _current_rewrite()
    if rewrite is None or _active() is not None:
        plan = None
    else:
        plan = rewrite.plan(iter_, extra_test, body, get_state, set_state)
    if plan is None:
        return stock(iter_, extra_test, body, get_state, set_state, symbol_names, opts)
    return plan.build(stock, iter_, body, get_state, set_state, symbol_names, opts)


# What a loop body reads.


def streamable(element_spec: Nested) -> bool:
    """Whether elements of this spec can be stacked into one buffer (dense, static shapes)."""
    return all(
        type(spec) is tf.TensorSpec and spec.shape.is_fully_defined()
        for spec in nest.flatten(element_spec)
    )


def iterator_handle(iterator: iterator_ops.OwnedIterator) -> tf.Tensor:
    return iterator._iterator_resource  # noqa: SLF001 - the iterator's only handle


def _label(iterator: iterator_ops.OwnedIterator) -> str:
    handle = iterator_handle(iterator)
    if isinstance(handle, ops.EagerTensor):
        return "an iterator captured from Python"
    return f"iterator {handle.name}"


@dataclass
class _Probe:
    """A loop body traced in a throwaway graph: what it reads and enqueues."""

    graph: ops.Graph | None = None
    iterators: dict[HandleRef, iterator_ops.OwnedIterator] = field(default_factory=dict)
    # next() calls per iteration
    reads: dict[HandleRef, int] = field(default_factory=dict)
    order: list[HandleRef] = field(default_factory=list)  # as next() is called
    enqueues: dict[str, Nested] = field(default_factory=dict)  # outfeed name -> structure
    unstreamable: dict[HandleRef, iterator_ops.OwnedIterator] = field(default_factory=dict)

    def next_element(self, iterator: iterator_ops.OwnedIterator) -> Nested:
        spec = iterator.element_spec
        key = iterator_handle(iterator).ref()
        if not streamable(spec):
            self.unstreamable[key] = iterator
            return UNHANDLED
        self.iterators[key] = iterator
        self.reads[key] = self.reads.get(key, 0) + 1
        self.order.append(key)
        return nest.map_structure(lambda s: array_ops.placeholder(s.dtype, s.shape), spec)


@dataclass
class _Stream:
    """One iterator's elements for a fused loop: k per iteration, prefetched by the host."""

    iterator: iterator_ops.OwnedIterator
    per_iteration: int
    flat_buffers: list[tf.Tensor]


@dataclass
class _FusedIteration:
    """The body of a fused loop being traced: `next()` slices the prefetched buffers."""

    graph: ops.Graph
    index: tf.Tensor
    streams: dict[HandleRef, _Stream]
    calls: dict[HandleRef, int] = field(default_factory=dict)

    def next_element(self, iterator: iterator_ops.OwnedIterator) -> Nested:
        key = iterator_handle(iterator).ref()
        stream = self.streams.get(key)
        if stream is None:
            return UNHANDLED
        read = self.calls.get(key, 0)
        if read >= stream.per_iteration:
            raise RuntimeError(
                f"A fused IPU loop body called next() on an iterator more often "
                f"({read + 1}) than when it was first traced ({stream.per_iteration}): the "
                f"body must read the same number of elements every time it is traced. Set "
                f"{FUSE_ENV}=0 to run such loops unfused."
            )
        self.calls[key] = read + 1
        position = self.index * stream.per_iteration + read
        return nest.pack_sequence_as(
            stream.iterator.element_spec, [buffer[position] for buffer in stream.flat_buffers]
        )


# Deciding and building.

# Ops through which a trip count flows as data; what they compute is followed further.
_DATA_OPS = frozenset(
    {
        "Identity", "Cast", "Neg", "AddV2", "Sub", "Mul", "RealDiv", "FloorDiv", "FloorMod",
        "Maximum", "Minimum", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
    }
)  # fmt: skip


@dataclass
class _FusedLoopRecord:
    """A fused loop, as the region's final checks need it."""

    range_: tf.Tensor
    host_bounds: list[tf.Tensor] | None  # the range's bounds on the host, if not static
    lowering_ops: set[ops.Operation]  # what autograph built for it in the region graph
    body_graph: ops.Graph


class _RegionRewrite:
    """The fused loops of one region being traced."""

    def __init__(self, region: CompiledRegion) -> None:
        self.region = region
        # The host reads of the region's last fused loop: the next loop's reads follow them
        # (its iterators may be the same, even through other handles).
        self.last_fetch: list[ops.Operation] = []
        self.fused_loops: list[_FusedLoopRecord] = []

    def finish(self) -> None:
        """Once the region is traced: keeps values known only at run time out of XLA shapes.

        Fused, the region compiles to XLA, which needs shapes as compile-time constants:
        a function argument (a trip count, say) is not one. A use of such a value that may
        be a shape makes the region run as a graph, as it would have unfused.
        """
        if not self.fused_loops:
            return
        on_host: set[ops.Operation] = set()
        for loop in self.fused_loops:
            if loop.host_bounds is not None and not loop.range_.consumers():
                # The loop used only the range's bounds: the range itself goes to the host.
                self.region.move_to_host(loop.range_.op, loop.host_bounds)
                on_host.add(loop.range_.op)
        reason = self._run_time_value_as_shape(on_host)
        if reason is not None:
            self.region.require_graph_mode(reason)

    def _run_time_value_as_shape(self, on_host: set[ops.Operation]) -> str | None:
        """Why an integer given at run time may be a shape in the region, or None."""
        sources = [
            tensor
            for op in self.region.graph.get_operations()
            if op.type == "Placeholder"
            for tensor in op.outputs
            if tensor.dtype.is_integer
        ]
        for loop in self.fused_loops:
            # A loop body also receives what its condition captures (the limit): only a use
            # inside the body counts.
            for external, internal in loop.body_graph.captures:
                if any(external is t for t in sources) and internal.consumers():
                    return f"the body of the loop over {loop.range_.name} uses {external.name}"
        lowering = {op for loop in self.fused_loops for op in loop.lowering_ops} | on_host
        pending = list(sources)
        seen: set[HandleRef] = set()
        while pending:
            tensor = pending.pop()
            if tensor.ref() in seen:
                continue
            seen.add(tensor.ref())
            for op in tensor.consumers():
                if op in lowering or not self._built_in_region(op):
                    continue
                if op.type not in _DATA_OPS:
                    return f"{tensor.name}, known at run time, is used by {op.name}"
                pending.extend(op.outputs)
        return None

    def plan(
        self,
        iter_: tf.Tensor,
        extra_test: Callable[[], tf.Tensor] | None,
        body: LoopBody,
        get_state: GetState,
        set_state: SetState,
    ) -> _FusedLoop | None:
        """A fused loop for this range loop, or None (with the reason logged) to keep autograph's."""
        reason = self._unfusable_position(iter_, extra_test)
        trip_count = host_bounds = None
        if reason is None:
            counted = self._host_trip_count(iter_)
            if counted is None:
                reason = "its trip count is computed inside the region"
            else:
                trip_count, host_bounds = counted
        probe = None
        if reason is None:
            probe = probe_body(body, get_state, set_state, iter_.dtype)
            reason = self._unfusable_reads(probe)
        if reason is not None or probe is None:
            logger.debug("Loop over %s keeps autograph's lowering: %s", iter_.name, reason)
            return None
        logger.debug(
            "Loop over %s is fused: trip count %s, next() calls per iteration %s, enqueues %s",
            iter_.name,
            trip_count,
            [(_label(probe.iterators[key]), count) for key, count in probe.reads.items()],
            probe.enqueues,
        )
        return _FusedLoop(self, trip_count, host_bounds, probe)

    def _unfusable_position(
        self, iter_: tf.Tensor, extra_test: Callable[[], tf.Tensor] | None
    ) -> str | None:
        region = self.region
        graph = ops.get_default_graph()
        if graph is not region.graph or graph._get_control_flow_context() is not region.context:  # noqa: SLF001
            return "it is not at the top level of the region"
        if device_loop.loop_stack():
            return "it is inside a device loop"
        if extra_test is not None:
            return "it has an extra loop test (break or return)"
        if not iter_.dtype.is_integer:
            return f"its range is of {iter_.dtype.name}"
        return None

    def _host_trip_count(
        self, iter_: tf.Tensor
    ) -> tuple[int | tf.Tensor, list[tf.Tensor] | None] | None:
        """The trip count, and the range's bounds built on the host if it is not static."""
        bounds = [self._host_value(t) for t in iter_.op.inputs]  # start, limit, delta
        if any(bound is None for bound in bounds):
            return None
        static = [bound for bound in bounds if isinstance(bound, int)]
        if len(static) == len(bounds):
            start, limit, delta = static
            return None if delta == 0 else (len(range(start, limit, delta)), None)
        with self.region.on_host():
            host_bounds = [
                tf.cast(bound() if callable(bound) else bound, iter_.dtype) for bound in bounds
            ]
            start, limit, delta = (tf.cast(bound, tf.int64) for bound in host_bounds)
            # ceil((limit - start) / delta), for either sign of delta.
            trip_count = tf.cast(tf.maximum(-((start - limit) // delta), 0), tf.int32)
        return trip_count, host_bounds

    def _host_value(self, tensor: tf.Tensor) -> int | Callable[[], tf.Tensor] | None:
        """An integer known now, a builder of the value on the host before the region, or None."""
        if tensor.dtype != tf.resource:
            static = tf.get_static_value(tensor)
            if static is not None:
                return int(static)
        if isinstance(tensor, ops.EagerTensor):
            return lambda: tensor
        if tensor.graph is not self.region.graph:
            return None
        op = tensor.op
        # Function inputs and captures are placeholders: given before the function runs.
        if op.type == "Placeholder" or not self._built_in_region(op):
            return lambda: tensor
        if op.type in ("Identity", "Cast") and not op.control_inputs:
            source = self._host_value(op.inputs[0])
            if callable(source):
                return lambda: tf.cast(source(), tensor.dtype)
        return None

    def _built_in_region(self, op: ops.Operation) -> bool:
        context = op._get_control_flow_context()  # noqa: SLF001
        while context is not None:
            if context is self.region.context:
                return True
            context = context.outer_context
        return False

    def _unfusable_reads(self, probe: _Probe | None) -> str | None:
        if probe is None:
            return "tracing its body failed"
        if probe.unstreamable:
            iterator = next(iter(probe.unstreamable.values()))
            return (
                f"{_label(iterator)} has elements of {iterator.element_spec}, "
                "not dense tensors of static shapes"
            )
        if not probe.reads or probe.graph is None:
            return "its body reads no tf.data iterator"
        captured = {t.ref() for t in probe.graph.external_captures}
        for key, iterator in probe.iterators.items():
            handle = iterator_handle(iterator)
            if key in captured:
                return f"it also reads {_label(iterator)} in nested control flow"
            if self._host_value(handle) is None:
                return f"{_label(iterator)} is created inside the region"
            if self._used_in_region(handle):
                return f"{_label(iterator)} is also read earlier in the region"
        return None

    def _used_in_region(self, handle: tf.Tensor) -> bool:
        """Whether an op built in the region so far takes `handle` (directly or captured)."""
        graph = self.region.graph
        if isinstance(handle, ops.EagerTensor) or handle.graph is not graph:
            handle = next((inner for outer, inner in graph.captures if outer is handle), None)
            if handle is None:
                return False
        return any(any(t is handle for t in op.inputs) for op in self.region.context.marked_ops)


def probe_body(
    body: LoopBody, get_state: GetState, set_state: SetState, iterate_dtype: tf.DType
) -> _Probe | None:
    """Traces one iteration of `body` in a throwaway function; restores the loop state after."""
    initial = get_state()
    try:
        return probe_reads(lambda: body(array_ops.placeholder(iterate_dtype, [], name="iterate")))
    finally:
        set_state(initial)


def probe_reads(trace_one_iteration: Callable[[], Any]) -> _Probe | None:
    """What one iteration, traced in a throwaway function, reads (None: it fails there)."""
    probe = _Probe()

    def traced() -> None:
        probe.graph = ops.get_default_graph()
        with body_active(probe):
            trace_one_iteration()

    try:
        func_graph_module.func_graph_from_py_func("openipu_loop_probe", traced, (), {})
    except Exception:  # the loop's own lowering traces the body again and reports it
        logger.debug("Tracing the loop body to probe it failed", exc_info=True)
        return None
    return probe


class _FusedLoop:
    """Builds the host prologue and the device loop for one range loop."""

    def __init__(
        self,
        rewrite: _RegionRewrite,
        trip_count: int | tf.Tensor,
        host_bounds: list[tf.Tensor] | None,
        probe: _Probe,
    ) -> None:
        self.rewrite = rewrite
        self.trip_count = trip_count
        self.host_bounds = host_bounds
        self.probe = probe

    def build(
        self,
        stock_range_for_stmt: Callable[..., None],
        iter_: tf.Tensor,
        body: LoopBody,
        get_state: GetState,
        set_state: SetState,
        symbol_names: tuple[str, ...],
        opts: dict[str, Any],
    ) -> None:
        region = self.rewrite.region
        iterators = self.probe.iterators
        keys = list(iterators)
        with region.on_host():
            # Read in the order the loop does: right even if two handles are one iterator.
            stacked = host_stream.fetch_from_iterators(
                [(iterator_handle(iterators[key]), iterators[key].element_spec) for key in keys],
                [keys.index(key) for key in self.probe.order],
                self.trip_count,
                after=self.rewrite.last_fetch,
            )
            self.rewrite.last_fetch = [nest.flatten(elements)[0].op for elements in stacked]
            streams = {
                key: _Stream(
                    iterators[key],
                    self.probe.reads[key],
                    [_at_least_one_row(buffer) for buffer in nest.flatten(elements)],
                )
                for key, elements in zip(keys, stacked, strict=True)
            }

        loop = device_loop.LoopContext(trip_count=self.trip_count)
        iteration = tf.constant(0, tf.int32, name="fused_iteration")

        def fused_get_state() -> tuple[Any, ...]:
            return (iteration, *get_state())

        def fused_set_state(values: Sequence[Any]) -> None:
            nonlocal iteration
            iteration, *rest = values
            set_state(rest)

        def fused_body(iterate: tf.Tensor) -> None:
            nonlocal iteration
            graph = ops.get_default_graph()
            if not _is_loop_body_of(graph, region.graph):
                # Autograph stages a body in a scratch graph to type undefined loop variables.
                with body_active(_Probe(graph)):
                    body(iterate)
            else:
                loop.index, loop.body_graph = iteration, graph
                fused = _FusedIteration(graph, iteration, streams)
                with body_active(fused):
                    body(iterate)
                _check_all_read(fused, streams)
            iteration += 1

        opts = dict(opts, parallel_iterations=1)  # iterations run in order, as on the device
        stack = device_loop.loop_stack()
        stack.append(loop)
        ops_before = len(region.graph.get_operations())
        try:
            stock_range_for_stmt(
                iter_,
                None,
                fused_body,
                fused_get_state,
                fused_set_state,
                ("<fused iteration>", *symbol_names),
                opts,
            )
        finally:
            stack.pop()
        self.rewrite.fused_loops.append(
            _FusedLoopRecord(
                iter_,
                self.host_bounds,
                set(region.graph.get_operations()[ops_before:]),
                loop.body_graph,
            )
        )


def _at_least_one_row(buffer: tf.Tensor) -> tf.Tensor:
    """XLA compiles the loop body even if it never runs, and a slice of nothing would not compile."""
    rows = buffer.shape[0]
    if rows is not None and rows > 0:
        return buffer
    return tf.cond(
        tf.shape(buffer)[0] > 0,
        lambda: buffer,
        lambda: tf.zeros([1, *buffer.shape[1:]], buffer.dtype),
    )


def _is_loop_body_of(graph: ops.Graph, region_graph: ops.Graph) -> bool:
    return (
        isinstance(graph, control_flow_v2_func_graphs.WhileBodyFuncGraph)
        and graph.outer_graph is region_graph
    )


def _check_all_read(fused: _FusedIteration, streams: dict[HandleRef, _Stream]) -> None:
    for key, stream in streams.items():
        read = fused.calls.get(key, 0)
        if read != stream.per_iteration:
            raise RuntimeError(
                f"A fused IPU loop body called next() on an iterator {read} time(s), but "
                f"{stream.per_iteration} time(s) when it was first traced: the body must read "
                f"the same number of elements every time it is traced. Set {FUSE_ENV}=0 to run "
                "such loops unfused."
            )
