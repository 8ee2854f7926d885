"""Captured gradients in Keras train steps: every train step on the IPU runs in a
`GradientCaptureContext`, and an optimizer that supports them receives the gradients
captured by `keras.ipu.layers.CaptureUpstreamGradients` (or any
`capture_upstream_gradients`) as `apply_gradients(..., captured_grads=...)`.

This is the original's `_ipu_train_step` (graphcore/keras
keras/ipu/extensions/extensions_base.py). Here the model's own `train_step` runs,
so the optimizer's `apply_gradients` is wrapped while the step is traced. The
replicas trace in threads of their own: the wrapper is installed once per
optimizer (counted) and reads the capture context of the calling thread.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Iterator

from openipu._src.eager.backprop import GradientCaptureContext

_lock = threading.Lock()
_current = threading.local()
#: id(optimizer) -> (the optimizer's own `apply_gradients` attribute or None, users)
_wrapped: dict[int, tuple[object, int]] = {}


def supports_captured_grads(optimizer) -> bool:
    """extensions_base.py `_optimizer_supports_captured_grads`."""
    if hasattr(optimizer, "supports_captured_grads"):
        return optimizer.supports_captured_grads
    spec = inspect.getfullargspec(type(optimizer).apply_gradients)
    return bool(spec.kwonlyargs and "captured_grads" in spec.kwonlyargs)


@contextlib.contextmanager
def capturing_train_step(model) -> Iterator[None]:
    """Traces a train step of `model` in a capture context whose gradients go to its
    optimizer when it supports them."""
    optimizer = getattr(model, "optimizer", None)
    forward = optimizer is not None and supports_captured_grads(optimizer)
    context = GradientCaptureContext()
    previous = getattr(_current, "context", None)
    with context:
        _current.context = context
        if forward:
            _install(optimizer)
        try:
            yield
        finally:
            _current.context = previous
            if forward:
                _uninstall(optimizer)
            context.captured_gradients  # noqa: B018 - pops the frame if nothing read it


def _install(optimizer) -> None:
    with _lock:
        own, users = _wrapped.get(id(optimizer), (None, 0))
        if users == 0:
            own = optimizer.__dict__.get("apply_gradients")
            original = optimizer.apply_gradients

            def apply_gradients(grads_and_vars, *args, **kwargs):
                context = getattr(_current, "context", None)
                captured = context.captured_gradients if context is not None else None
                if captured:
                    # The original's train step passes the captured gradients alone
                    # (extensions_base.py `_ipu_train_step`): an optimizer taking them
                    # need not take Keras' `name`.
                    return original(grads_and_vars, captured_grads=captured)
                return original(grads_and_vars, *args, **kwargs)

            object.__setattr__(optimizer, "apply_gradients", apply_gradients)
        _wrapped[id(optimizer)] = (own, users + 1)


def _uninstall(optimizer) -> None:
    with _lock:
        own, users = _wrapped[id(optimizer)]
        if users > 1:
            _wrapped[id(optimizer)] = (own, users - 1)
            return
        del _wrapped[id(optimizer)]
        if own is None:
            object.__delattr__(optimizer, "apply_gradients")
        else:
            object.__setattr__(optimizer, "apply_gradients", own)
