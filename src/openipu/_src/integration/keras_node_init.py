"""`tf_keras` `Node.__init__`, wrapped: a hook sees every functional-graph node.

Why: layers called inside `tf.keras.ipu.PipelineStage(n)` are assigned to
pipeline stage n; in a functional model a call creates a `Node`, and the stage
is recorded on it (`keras/extensions/pipeline_stages.py`). Keras has no hook
for node creation. Checked with tf_keras 2.21 (`tf_keras.src.engine.node.Node`
is created by every symbolic layer call).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, register

_after_init: list[Callable] = []


def _wrap_init(stock: Callable) -> Callable:
    @functools.wraps(stock)
    def init(self, *args, **kwargs):
        stock(self, *args, **kwargs)
        for hook in _after_init:
            hook(self)

    return init


NODE_INIT = register(
    Patch(
        module="tf_keras.src.engine.node",
        attribute="Node.__init__",
        kind=Kind.METHOD,
        replacement=_wrap_init,
        reason="functional-graph nodes remember the PipelineStage they were created in",
        tf_keras=("2.21",),
    )
)


def install(after_init: Callable[[object], None]) -> None:
    """Calls `after_init(node)` after every `Node.__init__` (idempotent)."""
    if after_init not in _after_init:
        _after_init.append(after_init)
    apply(NODE_INIT)
