"""Backward ops of `tf.GradientTape` placed on the shard of their forward op.

Why: `ipu.sharding.enable_sharded_gradient_tape` (spec 21.17) makes the gradient ops a
tape builds inherit the `ipu_shard` of their forward op, as the original's
tensorflow/python/ipu/sharding.py does. A tape records an op by its name and attribute
tuple only (`execute.record_gradient`), and builds its gradient from those through the
gradient function registered with `pywrap_tfe`; so the shard in scope when the op is
recorded is appended to its attributes, and the gradient function registered here
takes it off again and builds the gradient in that shard's scope. Checked with
TensorFlow 2.21.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from tensorflow.python import pywrap_tfe
from tensorflow.python.eager import backprop, context
from tensorflow.python.framework import ops

from openipu._src.integration.patching import Kind, Patch, apply, register

SHARDING_ATTR_NAME = "_XlaSharding"

_lock = threading.Lock()
_shard_scope: list[Callable[[bytes], contextlib.AbstractContextManager[Any]]] = []


def _recording_shard(stock: Callable[..., Any]) -> Callable[..., Any]:
    def record_gradient(op_name, inputs, attrs, outputs):  # noqa: ANN001, ANN202 - TF's
        # The backward op of a pipeline stage is placed by its forward stage (the original's
        # rule); sharding is for graphs only.
        if not context.executing_eagerly() and op_name != "PipelineStage":
            shard = ops.get_default_graph()._attr_scope_map.get(SHARDING_ATTR_NAME)  # noqa: SLF001
            if shard is not None:
                extra = (SHARDING_ATTR_NAME, shard)
                attrs = tuple(attrs) + extra if attrs is not None else extra
        return stock(op_name, inputs, attrs, outputs)

    return record_gradient


RECORD_GRADIENT = register(
    Patch(
        module="tensorflow.python.eager.execute",
        attribute="record_gradient",
        kind=Kind.FUNCTION,
        replacement=_recording_shard,
        reason="a tape records the ipu_shard of each op, so that its gradient is built on "
        "the same shard (ipu.sharding.enable_sharded_gradient_tape)",
        tensorflow=("2.21",),
    )
)


def _sharded_gradient_function(
    op_name: str, attr_tuple: tuple[Any, ...] | None, *args: Any, **kwargs: Any
) -> Any:
    scope: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if attr_tuple and len(attr_tuple) >= 2 and attr_tuple[-2] == SHARDING_ATTR_NAME:
        value = attr_tuple[-1]
        attr_tuple = attr_tuple[:-2]
        if _shard_scope:
            scope = _shard_scope[0](getattr(value, "s", value))
    with scope:
        return backprop._gradient_function(op_name, attr_tuple, *args, **kwargs)  # noqa: SLF001


def enable(shard_scope: Callable[[bytes], contextlib.AbstractContextManager[Any]]) -> None:
    """From now on tapes build gradients in `shard_scope(<the forward op's _XlaSharding>)`."""
    with _lock:
        if not _shard_scope:
            _shard_scope.append(shard_scope)
        apply(RECORD_GRADIENT)
        # The tape calls the registered function (backprop registers its own at import).
        pywrap_tfe.TFE_Py_RegisterGradientFunction(_sharded_gradient_function)
