"""The IPU device that code is being built for (`ipu_scope`, an IPUStrategy scope)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

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
    from openipu._src.strategy import ipu_strategy

    return ipu_strategy.current_strategy_ordinal()
