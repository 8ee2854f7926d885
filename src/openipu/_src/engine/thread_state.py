"""Carrying the engine's build state into replica threads.

The engine keeps what is being built (the compiled region, the enclosing
device loops, the IPU device) in thread-local stacks. The lock-step replicas
(`engine.replicas`) build in threads of their own, which see the state of the
thread that started them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from openipu._src.engine import device_scope, floating_point_checks

_HOLDERS: list[tuple[object, str]] = []


def _holders() -> list[tuple[object, str]]:
    if not _HOLDERS:
        # import cycle: device_loop and region reach this module (through replicas.lockstep)
        from openipu._src.engine import device_loop, region

        _HOLDERS.extend(
            [
                (region._state, "regions"),
                (device_loop._state, "loops"),
                (device_scope._state, "devices"),
            ]  # noqa: SLF001
        )
    return _HOLDERS


def _fp_checks(region: Any) -> contextlib.AbstractContextManager[None]:
    if region is None:
        return contextlib.nullcontext()
    return floating_point_checks.checking(region.fp_bits, region.ipu_ordinal, region.saturates_half)


def snapshot() -> list[list[Any]]:
    """Copies of the current thread's engine stacks."""
    return [list(getattr(holder, name, [])) for holder, name in _holders()]


@contextlib.contextmanager
def restored(saved: list[list[Any]]) -> Iterator[None]:
    """Within this context, this thread sees the stacks of `saved`."""
    previous: list[list[Any] | None] = [getattr(holder, name, None) for holder, name in _holders()]
    for (holder, name), stack in zip(_holders(), saved, strict=True):
        setattr(holder, name, list(stack))
    regions = saved[0]
    try:
        # A region checking floating-point exceptions checks the ops of every replica.
        with _fp_checks(regions[-1] if regions else None):
            yield
    finally:
        for (holder, name), earlier in zip(_holders(), previous, strict=True):
            if earlier is None:
                if hasattr(holder, name):
                    delattr(holder, name)
            else:
                setattr(holder, name, earlier)
