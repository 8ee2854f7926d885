"""`for _ in tf.range(n): next(iterator)` loops traced for an executable become its streams.

The original's application_compile_op compiles a function whose autograph range loop
reads a `tf.data` iterator (created under IPUStrategy) into an executable whose streamed
input is that iterator's element (application_compile_test.py,
test_compile_op_with_defunc_infeed_iterator_outfeed): the iterator is not read when
compiling, and each call of the executable is given the loop's elements. Here such a
loop, met while the executable's function is traced (`stream_capture` active), is handed
to the capture as the device loop over an infeed would be: `n` steps, the j-th `next()`
of a step answered with that step's element. A `next()` at the function's top level
(outside any loop) is a one-step loop's element, so one element per call.

Kept to autograph's own lowering (so the executable has no stream for it): loops inside
other control flow or device loops, a trip count not known when tracing, `break` or
`return` in the body, loop state that is not tensors, and bodies that read no iterator,
several iterators, or elements of unknown shape. A body reading its iterator several
times a step streams each read, as the original's infeed dequeued several times: a step
is given its reads' elements stacked, the j-th `next()` answered with the j-th.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import tensorflow as tf
from tensorflow.python.data.ops import iterator_ops
from tensorflow.python.framework import ops
from tensorflow.python.util import nest

from openipu._src.engine import autograph_loops, device_loop
from openipu._src.engine.autograph_loops import GetState, LoopBody, SetState
from openipu._src.engine.executable import stream_capture
from openipu._src.engine.value_types import Nested


@contextlib.contextmanager
def streaming_iterator_loops() -> Iterator[None]:
    """While an executable's function is traced: its iterator loops become its streams."""
    capture = stream_capture.current()
    if capture is not None:
        capture.repeat_without_infeed = _repeat_reading_an_iterator
    with autograph_loops.rewriting(_ExecutableRewrite(ops.get_default_graph())):
        yield


def _repeat_reading_an_iterator(n: int, body: Callable[..., Nested], inputs: Nested) -> Any:
    """`loops.repeat(n, body, inputs)` without an infeed whose body reads an IPU iterator:
    as the original's, where each `next()` is a dequeue of the iterator's infeed
    (ipu_infeed_queue.py), a loop streaming that iterator's elements."""
    capture = stream_capture.current()
    if capture is None:
        return stream_capture.NOT_HANDLED
    carried = [tf.convert_to_tensor(v) for v in device_loop._as_list(inputs)]  # noqa: SLF001
    with capture.collecting():  # what the probe enqueues is not the program's
        probe = autograph_loops.probe_reads(
            lambda: body(*[tf.zeros(t.shape, t.dtype) for t in carried])
        )
    if probe is None or probe.unstreamable or len(probe.iterators) != 1:
        return stream_capture.NOT_HANDLED
    ((key, iterator),) = probe.iterators.items()
    spec = iterator.element_spec
    reads = probe.reads[key]

    def step(*values_and_element: Any, **element_kwargs: Any) -> Nested:
        values = values_and_element[: len(carried)]
        given = [*values_and_element[len(carried) :], *nest.flatten(element_kwargs)]
        element = nest.pack_sequence_as(spec, nest.flatten(given))
        streamed = _StreamedStep(ops.get_default_graph(), key, element, reads)
        with autograph_loops.body_active(streamed):
            return body(*values)

    unconverted = tf.autograph.experimental.do_not_convert(step)
    return capture.take_loop(n, unconverted, carried, _IteratorFeed(spec), reads_per_step=reads)


@dataclasses.dataclass
class _IteratorFeed:
    """The iterator as the infeed of a captured loop (the builder asks its element_spec)."""

    element_spec: Nested


@dataclasses.dataclass
class _StreamedStep:
    """A step's body being traced: `next()` on the loop's iterator gives the step's element."""

    graph: ops.Graph | None
    iterator_key: object
    element: Nested
    reads_per_step: int = 1
    reads: int = 0

    def next_element(self, iterator: iterator_ops.OwnedIterator) -> Nested:
        key = autograph_loops.iterator_handle(iterator).ref()
        if key != self.iterator_key or self.reads == self.reads_per_step:
            return autograph_loops.UNHANDLED
        self.reads += 1
        if self.reads_per_step == 1:
            return self.element
        return nest.map_structure(lambda t: t[self.reads - 1], self.element)


class _ExecutableRewrite:
    def __init__(self, graph: ops.Graph) -> None:
        self.graph = graph  # the function's own graph, where its top-level reads are

    def next_outside_loops(self, iterator: iterator_ops.OwnedIterator) -> Nested:
        """A `next(iterator)` at the function's top level: as the original's IPU iterator
        reads its infeed (ipu_infeed_queue.py, `_next_internal` is the infeed's
        `_dequeue()`), the element of a one-step loop the capture streams, one per call."""
        capture = stream_capture.current()
        spec = iterator.element_spec
        if (
            capture is None
            or ops.get_default_graph() is not self.graph
            or not autograph_loops.streamable(spec)
        ):
            return autograph_loops.UNHANDLED
        zeros = [tf.zeros(s.shape, s.dtype) for s in nest.flatten(spec)]

        def read(*values_and_element: Any, **element_kwargs: Any) -> list[tf.Tensor]:
            # The builder spreads the element after the carried values, as for any loop.
            given = [*values_and_element[len(zeros) :], *nest.flatten(element_kwargs)]
            return list(nest.flatten(given))

        unconverted = tf.autograph.experimental.do_not_convert(read)
        element = capture.take_loop(1, unconverted, zeros, _IteratorFeed(spec))
        return nest.pack_sequence_as(spec, nest.flatten(element))

    def plan(
        self,
        iter_: tf.Tensor,
        extra_test: Callable[[], tf.Tensor] | None,
        body: LoopBody,
        get_state: GetState,
        set_state: SetState,
    ) -> _StreamedLoop | None:
        capture = stream_capture.current()
        if capture is None or extra_test is not None or not iter_.dtype.is_integer:
            return None
        graph = ops.get_default_graph()
        if graph._get_control_flow_context() is not None:  # noqa: SLF001 - a TF1 cond or loop
            return None
        bounds = [tf.get_static_value(t) for t in iter_.op.inputs]  # start, limit, delta
        if iter_.op.type != "Range" or any(b is None for b in bounds) or bounds[2] == 0:
            return None
        start, limit, delta = (int(b) for b in bounds)
        state = get_state()
        if not all(isinstance(v, (tf.Tensor, tf.Variable)) for v in state):
            return None  # undefined or Python loop variables: autograph types them itself
        with capture.collecting():  # what the probe enqueues is not the program's
            probe = autograph_loops.probe_body(body, get_state, set_state, iter_.dtype)
        if probe is None or probe.unstreamable or len(probe.iterators) != 1:
            return None
        ((key, iterator),) = probe.iterators.items()
        if not autograph_loops.streamable(iterator.element_spec):
            return None
        trip_count = len(range(start, limit, delta))
        return _StreamedLoop(capture, trip_count, start, delta, key, iterator, probe.reads[key])


@dataclasses.dataclass
class _StreamedLoop:
    capture: stream_capture.Capture
    trip_count: int
    start: int
    delta: int
    iterator_key: object
    iterator: iterator_ops.OwnedIterator
    reads_per_step: int

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
        del stock_range_for_stmt, symbol_names, opts  # the capture builds the loop
        spec = self.iterator.element_spec
        state_size = len(get_state())

        def step(index: tf.Tensor, *values_and_element: Any, **element_kwargs: Any) -> Nested:
            values = values_and_element[:state_size]
            # The builder spreads the element as a loop's infeed element is spread.
            given = [*values_and_element[state_size:], *nest.flatten(element_kwargs)]
            element = nest.pack_sequence_as(spec, nest.flatten(given))
            set_state(list(values))
            streamed = _StreamedStep(
                ops.get_default_graph(), self.iterator_key, element, self.reads_per_step
            )
            with autograph_loops.body_active(streamed):
                body(tf.cast(self.start + index * self.delta, iter_.dtype))
            return [index + 1, *_tensors(get_state())]

        carried = [tf.constant(0, tf.int32), *_tensors(get_state())]
        # Called by the builder's (converted) code: autograph must not convert `body`,
        # which is its own output already.
        unconverted = tf.autograph.experimental.do_not_convert(step)
        final = self.capture.take_loop(
            self.trip_count,
            unconverted,
            carried,
            _IteratorFeed(spec),
            reads_per_step=self.reads_per_step,
        )
        set_state(list(final)[1:] if isinstance(final, list) else [])


def _tensors(values: Sequence[Any]) -> list[tf.Tensor]:
    return [tf.convert_to_tensor(v) for v in values]
