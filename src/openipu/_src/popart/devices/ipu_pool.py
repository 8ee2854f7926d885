"""Which emulated IPUs are attached, process-wide, as the driver knows on a real host.

A hardware device (`DeviceType.Ipu`) attaches to its IPUs; while it is attached no other
device can attach to any of them, which is what makes `acquireAvailableDevice` pick free
IPUs and `tryAcquire*` return None when none are left.
"""

from __future__ import annotations

import itertools
import threading

_lock = threading.Lock()
_owners: dict[int, int] = {}  # IPU -> the token of the DeviceInfo attached to it
_tokens = itertools.count(1)


def new_owner() -> int:
    """A token that identifies one device in the pool (ids of dead objects can be reused)."""
    return next(_tokens)


def try_attach(ipus: tuple[int, ...], owner: int) -> bool:
    """Attaches `owner` to all of `ipus`, or to none if any is attached to someone else."""
    with _lock:
        if any(_owners.get(ipu, owner) != owner for ipu in ipus):
            return False
        for ipu in ipus:
            _owners[ipu] = owner
        return True


def detach(ipus: tuple[int, ...], owner: int) -> None:
    with _lock:
        for ipu in ipus:
            if _owners.get(ipu) == owner:
                del _owners[ipu]


def is_attached_by(ipus: tuple[int, ...], owner: int) -> bool:
    with _lock:
        return bool(ipus) and all(_owners.get(ipu) == owner for ipu in ipus)


def attached_ipus() -> set[int]:
    with _lock:
        return set(_owners)


def all_free(ipus: tuple[int, ...]) -> bool:
    with _lock:
        return not any(ipu in _owners for ipu in ipus)
