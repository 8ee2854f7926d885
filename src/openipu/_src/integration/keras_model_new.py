"""`tf_keras` `Model.__new__`, wrapped: a hook sees every model as it is created.

Why: a Keras model created while an IPUStrategy with Keras extensions is the
current strategy gains the IPU methods (`keras/extensions/activation.py` changes
the instance's class). Keras has no creation hook, and `__new__` is the one
place that sees every model (functional, Sequential, subclassed) before its
`__init__` runs. Checked with tf_keras 2.21 (`Model.__new__` is defined in
`tf_keras.src.engine.training` and chooses the functional class itself).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, register

_after_new: list[Callable] = []


def _wrap_new(stock: staticmethod) -> staticmethod:
    stock_new = stock.__func__

    @functools.wraps(stock_new)
    def new(cls, *args, **kwargs):
        instance = stock_new(cls, *args, **kwargs)
        for hook in _after_new:
            hook(instance)
        return instance

    return staticmethod(new)


MODEL_NEW = register(
    Patch(
        module="tf_keras.src.engine.training",
        attribute="Model.__new__",
        kind=Kind.STATICMETHOD,
        replacement=_wrap_new,
        reason="models created in an IPUStrategy scope gain the IPU methods (their class "
        "becomes a subclass mixing in KerasExtensions)",
        tf_keras=("2.21",),
    )
)


def install(after_new: Callable[[object], None]) -> None:
    """Calls `after_new(model)` for every Keras model once `__new__` made it (idempotent)."""
    if after_new not in _after_new:
        _after_new.append(after_new)
    apply(MODEL_NEW)
