"""`tf_keras` `Node.__init__` and `Layer.__init__`, wrapped: a hook sees every
functional-graph node and every layer as they are made.

Why: layers called inside `tf.keras.ipu.PipelineStage(n)` are assigned to
pipeline stage n; in a functional model a call creates a `Node`, and the stage
is recorded on it; a layer constructed inside the scope has that stage for
every call not made in a scope of its own, as the original's
keras/engine/base_layer.py and node.py (`keras/extensions/pipeline_stages.py`).
Keras has no hook for node or layer creation. Checked with tf_keras 2.21
(`tf_keras.src.engine.node.Node` is created by every symbolic layer call; every
layer's `__init__` reaches `tf_keras.src.engine.base_layer.Layer.__init__`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, register

_after_init: list[Callable] = []
_after_layer_init: list[Callable] = []


def _wrapping(hooks: list[Callable]) -> Callable[[Callable], Callable]:
    def wrap(stock: Callable) -> Callable:
        @functools.wraps(stock)
        def init(self, *args, **kwargs):
            stock(self, *args, **kwargs)
            for hook in hooks:
                hook(self)

        return init

    return wrap


NODE_INIT = register(
    Patch(
        module="tf_keras.src.engine.node",
        attribute="Node.__init__",
        kind=Kind.METHOD,
        replacement=_wrapping(_after_init),
        reason="functional-graph nodes remember the PipelineStage they were created in",
        tf_keras=("2.21",),
    )
)


LAYER_INIT = register(
    Patch(
        module="tf_keras.src.engine.base_layer",
        attribute="Layer.__init__",
        kind=Kind.METHOD,
        replacement=_wrapping(_after_layer_init),
        reason="layers remember the PipelineStage they were constructed in",
        tf_keras=("2.21",),
    )
)


def install(
    after_init: Callable[[object], None], after_layer_init: Callable[[object], None]
) -> None:
    """Calls `after_init(node)` after every `Node.__init__` and `after_layer_init(layer)`
    after every `Layer.__init__` (idempotent)."""
    if after_init not in _after_init:
        _after_init.append(after_init)
    if after_layer_init not in _after_layer_init:
        _after_layer_init.append(after_layer_init)
    apply(NODE_INIT)
    apply(LAYER_INIT)


def install_layer_hook(after_layer_init: Callable[[object], None]) -> None:
    """Calls `after_layer_init(layer)` after every `Layer.__init__` (idempotent)."""
    if after_layer_init not in _after_layer_init:
        _after_layer_init.append(after_layer_init)
    apply(LAYER_INIT)
