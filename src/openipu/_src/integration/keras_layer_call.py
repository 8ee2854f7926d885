"""`tf_keras` `Layer.__call__`, intercepted for one thread while a context is open.

Why: the pipeline stages of a subclassed model are the stages its direct
sublayers are called in; `keras/extensions/pipeline_stages.py` traces
`model.call` once and records each layer call. Keras has no call hook that
sees the layer. The patch is installed only while some thread traces (counted),
and other threads' calls go to the stock method. Checked with tf_keras 2.21
(`tf_keras.layers.Layer` is `tf_keras.src.engine.base_layer.Layer`; `Model`
defines its own `__call__`, so calls of nested models are not seen, as before).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from openipu._src.integration.patching import Kind, Patch, applied, delegating, register

_state = threading.local()


def _current() -> Callable | None:
    stack = getattr(_state, "handlers", [])
    return stack[-1] if stack else None


LAYER_CALL = register(
    Patch(
        module="tf_keras.src.engine.base_layer",
        attribute="Layer.__call__",
        kind=Kind.METHOD,
        replacement=lambda stock: delegating(stock, _current),
        reason="tracing a subclassed model's call records which sublayers run in which "
        "PipelineStage",
        tf_keras=("2.21",),
    )
)


@contextlib.contextmanager
def intercepted(handler: Callable) -> Iterator[None]:
    """Within this context this thread's layer calls go to `handler(stock, layer, *args, **kwargs)`."""
    stack = _state.__dict__.setdefault("handlers", [])
    stack.append(handler)
    try:
        with applied(LAYER_CALL):
            yield
    finally:
        stack.pop()
