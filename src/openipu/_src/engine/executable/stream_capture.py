"""Capturing a program's streams while it is traced for an executable.

An executable runs a function whose device loop reads an infeed and writes outfeeds. Its
file cannot hold the host's datasets or queues, so while the function is traced for it,
the device loop reading an infeed is not built by the engine: it is handed to the
capture (`take_loop`), whose builder (the executable's) runs the loop's body over the
stacked elements each call brings and returns the loop's results. Outfeed enqueues hand
their tensors to the capture too (`take_enqueue`): those of the loop's body are what each
step gives back, those outside any loop what the one step of a loop-less function gives.
Both hooks are asked from the device loop and the outfeed queue, for the tracing thread only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.engine.value_types import Infeed, Nested

_state = threading.local()


class StreamedElements(Protocol):
    """What a captured loop reads, as far as the executable needs it: its element's spec."""

    @property
    def element_spec(self) -> Nested: ...


@dataclasses.dataclass
class CapturedLoop:
    """A device loop over an infeed, met while tracing (`loops.repeat(n, body, inputs, infeed)`)."""

    iterations: int
    body: Callable[..., Nested]
    carried: Nested
    infeed: Infeed | StreamedElements
    #: A loop that can stall waiting for data (the original's ModuleExecutionCanStall,
    #: poplar_compiler.cc: a pipeline): its embedded runtime pushes dummy data on timeout.
    can_stall: bool = False
    #: Elements a step reads (the original's infeed dequeued several times per step): a
    #: step's element then has them stacked, in a leading dimension of this size.
    reads_per_step: int = 1


NOT_HANDLED = object()  # a loop `repeat_without_infeed` leaves to its own lowering


class Capture:
    """What the tracing met: the infeed loops, and the enqueues of the step being traced.

    `run_loop(loop)` builds a captured loop and returns its results (the loop's final
    carried values, as `loops.repeat` returns them).
    """

    def __init__(self, run_loop: Callable[[CapturedLoop], Nested]) -> None:
        self.loops: list[CapturedLoop] = []
        self.top_level_enqueues: list[tuple[Any, Nested]] = []
        self._enqueued = self.top_level_enqueues
        self._run_loop = run_loop
        #: `loops.repeat(n, body, inputs)` without an infeed, whose body may read an IPU
        #: iterator (`iterator_loops`): its loop, or NOT_HANDLED.
        self.repeat_without_infeed: Callable[[int, Callable[..., Nested], Nested], Any] | None = (
            None
        )

    def take_loop(
        self,
        n: int,
        body: Callable[..., Nested],
        inputs: Nested,
        infeed: Infeed | StreamedElements,
        can_stall: bool = False,
        reads_per_step: int = 1,
    ) -> Any:
        loop = CapturedLoop(n, body, inputs, infeed, can_stall, reads_per_step)
        self.loops.append(loop)
        return self._run_loop(loop)

    @property
    def collecting_enqueues(self) -> bool:
        return True  # in a loop's step or at the function's top level

    def take_enqueue(self, queue: object, tensors: Nested) -> Any:
        self._enqueued.append((queue, tensors))
        return tf.no_op(name="ipu_captured_enqueue")

    @contextlib.contextmanager
    def collecting(self) -> Iterator[list[tuple[Any, Nested]]]:
        """While a loop's step is traced: the enqueues it makes, in order."""
        enqueued: list[tuple[Any, Nested]] = []
        previous, self._enqueued = self._enqueued, enqueued
        try:
            yield enqueued
        finally:
            self._enqueued = previous


def current() -> Capture | None:
    """The capture of the tracing thread, if an executable is being built."""
    capture: Capture | None = getattr(_state, "capture", None)
    return capture


@contextlib.contextmanager
def capturing(run_loop: Callable[[CapturedLoop], Nested]) -> Iterator[Capture]:
    previous = current()
    capture = Capture(run_loop)
    _state.capture = capture
    try:
        yield capture
    finally:
        _state.capture = previous


def flat_outputs(enqueued: list[tuple[Any, Nested]]) -> list[tf.Tensor]:
    """The tensors a step enqueued, flattened in enqueue order."""
    return [tf.convert_to_tensor(t) for _, tensors in enqueued for t in nest.flatten(tensors)]
