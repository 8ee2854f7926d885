"""How a Keras train step on the IPU hands its gradients to the optimizer.

The original's train step (graphcore/keras keras/ipu/extensions/extensions_base.py
`_ipu_train_step` with `_KerasOptimizerWrapper`):
- runs in a `GradientCaptureContext`, and an optimizer that supports them receives the
  gradients captured by `keras.ipu.layers.CaptureUpstreamGradients` (or any
  `capture_upstream_gradients`) as `apply_gradients(..., captured_grads=...)`;
- takes the gradients of a Keras optimizer from its `get_gradients`, which refuses a
  trainable weight without a gradient (ValueError "Variable ... has `None` for
  gradient."), where stock Keras drops it with a warning. A TF1 optimizer (Keras'
  TFOptimizer) gives its pairs as they are.

Here the model's own `train_step` runs, so the optimizer's `apply_gradients` is
wrapped while the step is traced. The replicas trace in threads of their own: the
wrapper is installed once per optimizer (counted) and reads the capture context of
the calling thread.
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
def train_step(model, refuse_none_gradients: bool) -> Iterator[None]:
    """Traces a train step of `model` in a capture context whose gradients go to its
    optimizer when it supports them; with `refuse_none_gradients` (a Keras optimizer),
    a weight without a gradient is an error, as the original's `get_gradients`."""
    optimizer = getattr(model, "optimizer", None)
    context = GradientCaptureContext()
    previous = (getattr(_current, "context", None), getattr(_current, "refuse_none", False))
    with context:
        _current.context, _current.refuse_none = context, refuse_none_gradients
        if optimizer is not None:
            _install(optimizer)
        try:
            yield
        finally:
            _current.context, _current.refuse_none = previous
            if optimizer is not None:
                _uninstall(optimizer)
            context.captured_gradients  # noqa: B018 - pops the frame if nothing read it


def _install(optimizer) -> None:
    with _lock:
        own, users = _wrapped.get(id(optimizer), (None, 0))
        if users == 0:
            own = optimizer.__dict__.get("apply_gradients")
            original = optimizer.apply_gradients
            forward = supports_captured_grads(optimizer)

            def apply_gradients(grads_and_vars, *args, **kwargs):
                if getattr(_current, "refuse_none", False):
                    grads_and_vars = _all_with_gradients(grads_and_vars)
                context = getattr(_current, "context", None)
                captured = context.captured_gradients if context is not None and forward else None
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


def _all_with_gradients(grads_and_vars) -> list:
    """The pairs as a list, if every variable has a gradient, else the ValueError of the
    original's optimizer_v2.py `get_gradients`."""
    pairs = list(grads_and_vars)
    for gradient, variable in pairs:
        if gradient is None:
            raise ValueError(
                f"Variable {variable} has `None` for gradient. Please make sure that all of "
                "your ops have a gradient defined (i.e. are differentiable). Common ops "
                "without gradient: K.argmax, K.round, K.eval."
            )
    return pairs
