"""The stack of frames that collect captured upstream gradients, one per capture context.

tensorflow/python/ipu/eager/backprop.py `_CapturedGradientStack`: each
`GradientCaptureContext` or `GradientCaptureTape` pushes a frame when entered;
the gradient of `capture_upstream_gradients` adds its incoming gradients to
the top frame under its tag; reading `captured_gradients` pops the frame.

The original's stack is one per process. Here each thread has its own: the
replicas of a Keras model trace their train steps in threads of their own, each
in its own capture context.
"""

from __future__ import annotations

import threading

_EMPTY_STACK = (
    "Attempting to access grad frame in an empty stack. The "
    "ipu.eager.backprop._CapturedGradientStack is for "
    "use only by ipu.eager.backprop.GradientCaptureTape or "
    "ipu.eager.backprop.GradientCaptureContext."
)


class CapturedGradientStack:
    """Frames of (owner id, [(tag, gradients)]), one stack per thread."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()

    @property
    def _frames(self) -> list[tuple[int, list[tuple[str, list]]]]:
        frames = getattr(self._local, "frames", None)
        if frames is None:
            frames = self._local.frames = []
        return frames

    def push_frame(self, owner) -> None:
        with self._lock:
            self._frames.append((id(owner), []))

    def pop_frame(self) -> dict[str, list]:
        with self._lock:
            if not self._frames:
                raise RuntimeError(_EMPTY_STACK)
            _, captured = self._frames.pop()
        return dict(captured)

    def push_gradients(self, tag: str, gradients: list) -> None:
        with self._lock:
            if not self._frames:
                raise RuntimeError(_EMPTY_STACK)
            captured = self._frames[-1][1]
            if tag in (existing for existing, _ in captured):
                raise ValueError("Gradient exists in the captured grads frame.")
            captured.append((tag, gradients))

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._frames)

    @property
    def top_owner(self) -> int:
        with self._lock:
            if not self._frames:
                raise RuntimeError(_EMPTY_STACK)
            return self._frames[-1][0]


STACK = CapturedGradientStack()
