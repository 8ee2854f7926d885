"""`tf_keras` `data_adapter.get_data_handler`, routed through a handler.

Why: `fit`/`evaluate`/`predict` on the IPU feed whole executions
(`steps_per_execution` batches per host call), so Keras must build openipu's
`IPUDataHandler` for models in an IPU data mode (`keras/extensions/
data_handler.py`). Keras builds its handler through this module function in
its training loops, with no other hook. Checked with tf_keras 2.21
(`training.py` calls `data_adapter.get_data_handler(...)` with `model=` set).
"""

from __future__ import annotations

from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, delegating, register

_handler: list[Callable] = []

GET_DATA_HANDLER = register(
    Patch(
        module="tf_keras.src.engine.data_adapter",
        attribute="get_data_handler",
        kind=Kind.FUNCTION,
        replacement=lambda stock: delegating(stock, lambda: _handler[0] if _handler else None),
        reason="Keras' training loops build openipu's IPUDataHandler (whole executions per "
        "step) for models in an IPU data mode",
        tf_keras=("2.21",),
    )
)


def install(get_data_handler: Callable) -> None:
    """Routes Keras to `get_data_handler(stock, *args, **kwargs)` (idempotent; first one stays)."""
    if not _handler:
        _handler.append(get_data_handler)
    apply(GET_DATA_HANDLER)
