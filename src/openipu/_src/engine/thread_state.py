"""Carrying the engine's build state into replica threads.

The engine keeps what is being built (the compiled region, the enclosing
device loops, the IPU device) in thread-local stacks. A mirrored strategy
traces each replica's function in a thread of its own, so functions that
the engine hands to `strategy.run` are wrapped to see the state of the
thread that built them, and to seed their random operations from their own
replica's stream.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import tensorflow as tf

_HOLDERS: list[tuple[object, str]] = []


def _holders() -> list[tuple[object, str]]:
    if not _HOLDERS:
        from openipu._src.engine import device_loop, device_scope, region

        _HOLDERS.extend(
            [
                (region._state, "regions"),
                (device_loop._state, "loops"),
                (device_scope._state, "devices"),
            ]  # noqa: SLF001
        )
    return _HOLDERS


def snapshot() -> list[list]:
    """Copies of the current thread's engine stacks."""
    return [list(getattr(holder, name, [])) for holder, name in _holders()]


@contextlib.contextmanager
def restored(saved: list[list]) -> Iterator[None]:
    """Within this context, this thread sees the stacks of `saved`."""
    previous: list[list | None] = [getattr(holder, name, None) for holder, name in _holders()]
    for (holder, name), stack in zip(_holders(), saved, strict=True):
        setattr(holder, name, list(stack))
    try:
        yield
    finally:
        for (holder, name), earlier in zip(_holders(), previous, strict=True):
            if earlier is None:
                if hasattr(holder, name):
                    delattr(holder, name)
            else:
                setattr(holder, name, earlier)


def for_replicas(fn: Callable, ipu_ordinal: int | None = None) -> Callable:
    """`fn`, to be run by `strategy.run`, seeing the calling thread's engine state."""
    saved = snapshot()

    @functools.wraps(fn)
    def in_replica(*args, **kwargs):
        from openipu._src.engine import replication

        # Seeds follow the global replica: a replica draws alike in one process or several.
        with restored(saved), _seeded(ipu_ordinal, replication.global_replica_index()):
            return fn(*args, **kwargs)

    return in_replica


def _seeded(ipu_ordinal: int | None, replica: int):
    from openipu._src.engine import random_ops

    if ipu_ordinal is None or not tf.inside_function():
        return contextlib.nullcontext()
    return random_ops.seeded_from_device(ipu_ordinal, replica)
