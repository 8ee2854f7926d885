"""Capturing a program's streams while it is traced for an executable.

An executable runs a function whose device loop reads an infeed and writes outfeeds. Its
file cannot hold the host's datasets or queues, so while the function is traced for it,
the device loop reading an infeed is not built: it is handed to the capture
(`take_loop`), and the executable's builder runs the loop's body itself over the
stacked elements each call brings. While that body is traced, outfeed enqueues hand
their tensors to the capture too (`take_enqueue`): they are what the call gives back.
Both hooks are asked from the device loop and the outfeed queue, for the tracing thread only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.engine.value_types import Infeed, Nested

_state = threading.local()


@dataclasses.dataclass
class CapturedLoop:
    """A device loop over an infeed, met while tracing (`loops.repeat(n, body, inputs, infeed)`)."""

    iterations: int
    body: Callable[..., Nested]
    carried: Nested
    infeed: Infeed


class Capture:
    """What the tracing met: the infeed loops, and the enqueues of the step being traced."""

    def __init__(self) -> None:
        self.loops: list[CapturedLoop] = []
        self._enqueued: list[tuple[Any, Nested]] | None = None

    def take_loop(self, n: int, body: Callable[..., Nested], inputs: Nested, infeed: Infeed) -> Any:
        self.loops.append(CapturedLoop(n, body, inputs, infeed))
        return tf.no_op(name="ipu_captured_loop")

    @property
    def collecting_enqueues(self) -> bool:
        return self._enqueued is not None

    def take_enqueue(self, queue: object, tensors: Nested) -> Any:
        assert self._enqueued is not None  # asked only while collecting (see the outfeed)
        self._enqueued.append((queue, tensors))
        return tf.no_op(name="ipu_captured_enqueue")

    @contextlib.contextmanager
    def collecting(self) -> Iterator[list[tuple[Any, Nested]]]:
        """While the step is traced: the enqueues it makes, in order."""
        enqueued: list[tuple[Any, Nested]] = []
        self._enqueued = enqueued
        try:
            yield enqueued
        finally:
            self._enqueued = None


def current() -> Capture | None:
    """The capture of the tracing thread, if an executable is being built."""
    capture: Capture | None = getattr(_state, "capture", None)
    return capture


@contextlib.contextmanager
def capturing() -> Iterator[Capture]:
    previous = current()
    capture = Capture()
    _state.capture = capture
    try:
        yield capture
    finally:
        _state.capture = previous


def flat_outputs(enqueued: list[tuple[Any, Nested]]) -> list[tf.Tensor]:
    """The tensors a step enqueued, flattened in enqueue order."""
    return [tf.convert_to_tensor(t) for _, tensors in enqueued for t in nest.flatten(tensors)]
