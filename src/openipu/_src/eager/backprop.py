"""Gradient capture contexts (`ipu.eager.backprop`): where the gradients of operations
wrapped by `grad_util_ops.capture_upstream_gradients` are collected."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.ops.unconnected_gradients import UnconnectedGradients

from openipu._src.eager.captured_gradients import STACK


def num_gradient_collection_tapes() -> int:
    """How many capture contexts are collecting gradients now."""
    return STACK.count


class GradientCaptureContext:
    """Within it, gradients computed through `capture_upstream_gradients` are captured;
    `captured_gradients` maps each tag to its list of incoming gradients."""

    def __init__(self) -> None:
        self.__captured_grads: dict[str, list] | None = None

    def __enter__(self):
        STACK.push_frame(self)
        return self

    def __exit__(self, typ, value, traceback) -> None:
        # The frame stays until the gradients are read (or the context is collected), as in
        # the original: gradients are often computed after the `with` block.
        pass

    def __del__(self) -> None:
        if STACK.count > 0 and STACK.top_owner == id(self):
            STACK.pop_frame()

    def _update_grads(self) -> None:
        if STACK.count > 0 and STACK.top_owner == id(self):
            self.__captured_grads = STACK.pop_frame()

    @property
    def captured_gradients(self):
        """The captured gradients by tag (None before any gradient was computed)."""
        self._update_grads()
        return self.__captured_grads

    @captured_gradients.setter
    def captured_gradients(self, _) -> None:
        raise ValueError("captured_gradients is read only.")


class GradientCaptureTape(tf.GradientTape, GradientCaptureContext):
    """A GradientTape that also captures the gradients of `capture_upstream_gradients`."""

    def __init__(self, persistent=False, watch_accessed_variables=True) -> None:
        tf.GradientTape.__init__(
            self, persistent=persistent, watch_accessed_variables=watch_accessed_variables
        )
        GradientCaptureContext.__init__(self)

    def gradient(
        self,
        target,
        sources,
        output_gradients=None,
        unconnected_gradients=UnconnectedGradients.NONE,
    ):
        gradients = tf.GradientTape.gradient(
            self,
            target,
            sources,
            output_gradients=output_gradients,
            unconnected_gradients=unconnected_gradients,
        )
        self._update_grads()
        return gradients

    def __enter__(self):
        tf.GradientTape.__enter__(self)
        GradientCaptureContext.__enter__(self)
        return self

    def __exit__(self, typ, value, traceback) -> None:
        tf.GradientTape.__exit__(self, typ, value, traceback)
