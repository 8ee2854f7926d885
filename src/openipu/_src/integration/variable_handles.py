"""Patch: a resource variable's `handle` may be redirected while a replica is built.

Target: `tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.handle`
(a property returning `self._handle`), TensorFlow 2.21. Every read, write and
optimizer update of a resource variable reaches its resource through this property
(`read_value`, `assign*`, `scatter_*`, the `ResourceApply*` optimizer ops).

Why: on an IPU each replica of a program holds its own copy of every variable. The
engine builds replica r's copy of a program in a thread of its own
(`engine.replicas.lockstep`); while that thread builds, `handle` returns the handle
of replica r's copy of the variable (`engine.replicas.variable_copies`), so the
replica's ops read and update its own copy without any change to user code.

Outside replicated building (no hook installed for the thread) the property behaves
exactly as TensorFlow's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tensorflow.python.ops import resource_variable_ops

from openipu._src.integration.patching import Kind, Patch, apply, register

_stock_handle: property = resource_variable_ops.BaseResourceVariable.__dict__["handle"]
_state = threading.local()
_stock_getter: Callable = _stock_handle.fget  # type: ignore[assignment]  # a property getter

HandleHook = Callable[[resource_variable_ops.BaseResourceVariable], object]


def stock_handle(variable: resource_variable_ops.BaseResourceVariable):
    """The variable's own handle, whatever hook is active."""
    return _stock_getter(variable)


def _handle(self):
    hook = getattr(_state, "hook", None)
    if hook is None:
        return _stock_getter(self)
    return hook(self)


VARIABLE_HANDLE = register(
    Patch(
        module="tensorflow.python.ops.resource_variable_ops",
        attribute="BaseResourceVariable.handle",
        kind=Kind.PROPERTY,
        replacement=lambda stock: property(_handle, doc=stock.__doc__),
        reason="while replica r of a replicated program is built, a variable's handle is "
        "that of replica r's copy (each replica reads and updates its own variables)",
        tensorflow=("2.21",),
    )
)


@contextmanager
def redirected(hook: HandleHook | None) -> Iterator[None]:
    """Within this context (this thread only), `variable.handle` is `hook(variable)`."""
    apply(VARIABLE_HANDLE)
    previous = getattr(_state, "hook", None)
    _state.hook = hook
    try:
        yield
    finally:
        _state.hook = previous
