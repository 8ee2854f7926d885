"""The IPU device that code is being built for (`ipu_scope`, an IPUStrategy scope)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import tensorflow as tf

_state = threading.local()


def _stack() -> list[int]:
    return _state.__dict__.setdefault("devices", [])


@contextlib.contextmanager
def building_for(ordinal: int) -> Iterator[None]:
    """Within this context, code is built for `/device:IPU:<ordinal>`."""
    _stack().append(ordinal)
    try:
        yield
    finally:
        _stack().pop()


def current_ipu_ordinal() -> int | None:
    """The ordinal of the IPU device being targeted, or None outside any IPU scope."""
    stack = _stack()
    if stack:
        return stack[-1]
    # In an IPU strategy's scope: its device (the engine knows strategies only by the
    # `ipu_ordinal` their internals expose).
    return getattr(tf.distribute.get_strategy().extended, "ipu_ordinal", None)
