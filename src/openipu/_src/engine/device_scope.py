"""The IPU device that code is being built for (`ipu_scope`, an IPUStrategy scope)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import tensorflow as tf

_state = threading.local()


def _stack() -> list[int]:
    stack: list[int] = _state.__dict__.setdefault("devices", [])
    return stack


@contextlib.contextmanager
def building_for(ordinal: int) -> Iterator[None]:
    """Within this context, code is built for `/device:IPU:<ordinal>`."""
    _stack().append(ordinal)
    _state.entered = scopes_entered() + 1
    try:
        yield
    finally:
        _stack().pop()


def scopes_entered() -> int:
    """How many times this thread has entered `building_for` (to learn whether code did)."""
    entered: int = _state.__dict__.get("entered", 0)
    return entered


def scoped_ipu_ordinal() -> int | None:
    """The ordinal of the innermost `building_for` (an `ipu_scope`), or None outside any."""
    stack = _stack()
    return stack[-1] if stack else None


def current_ipu_ordinal() -> int | None:
    """The ordinal of the IPU device being targeted, or None outside any IPU scope."""
    scoped = scoped_ipu_ordinal()
    if scoped is not None:
        return scoped
    # In an IPU strategy's scope: its device (the engine knows strategies only by the
    # `ipu_ordinal` their internals expose).
    return getattr(tf.distribute.get_strategy().extended, "ipu_ordinal", None)


def validate_device_ordinal(device_ordinal: object) -> int:
    """The queue's IPU device. None (the original's default) is the ordinal of the IPUStrategy
    in scope, or 0 (ipu_infeed_queue.py and ipu_outfeed_queue.py)."""
    if device_ordinal is None:
        extended = tf.distribute.get_strategy().extended
        return getattr(extended, "ipu_ordinal", 0)
    if not isinstance(device_ordinal, int):
        # The original's messages first (ipu_infeed_queue.py, ipu_outfeed_queue.py).
        raise ValueError(f"Device ordinal must be an integer: device_ordinal={device_ordinal!r}")
    if device_ordinal < 0:
        raise ValueError(f"Device ordinal must be >= 0: device_ordinal={device_ordinal}")
    return device_ordinal
