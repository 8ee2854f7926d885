"""The emulated machine's device listing, like `gc-info -l` on a real system.

A machine with N IPUs (N a power of two) lists N single-IPU devices (ids
0..N-1), then N/2 two-IPU devices, N/4 four-IPU devices, ... and one N-IPU
device. A multi-IPU device of size k holds the IPUs [i*k, (i+1)*k): the real
listing pairs physical IPUs in a board-specific order, which has no
observable effect in emulation.
"""

from __future__ import annotations

import dataclasses
import os

NUM_IPUS_ENV = "OPENIPU_NUM_IPUS"
DEFAULT_NUM_IPUS = 16


@dataclasses.dataclass(frozen=True)
class DeviceListing:
    """One entry of the device listing: an id and the IPUs it spans."""

    device_id: int
    ipus: tuple[int, ...]

    @property
    def num_ipus(self) -> int:
        return len(self.ipus)


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def num_emulated_ipus() -> int:
    """The number of IPUs in the emulated machine (`OPENIPU_NUM_IPUS`, default 16)."""
    raw = os.environ.get(NUM_IPUS_ENV, "")
    if not raw:
        return DEFAULT_NUM_IPUS
    try:
        count = int(raw)
    except ValueError:
        raise ValueError(
            f"{NUM_IPUS_ENV}={raw!r} is not an integer: set it to a power of two such as 16"
        ) from None
    if not is_power_of_two(count):
        raise ValueError(f"{NUM_IPUS_ENV}={count} must be a power of two (1, 2, 4, 8, 16, ...)")
    return count


def device_listing(num_ipus: int | None = None) -> list[DeviceListing]:
    """All device configurations of the machine, in `gc-info -l` id order."""
    total = num_emulated_ipus() if num_ipus is None else num_ipus
    listing: list = []
    size = 1
    while size <= total:
        for start in range(0, total, size):
            listing.append(DeviceListing(len(listing), tuple(range(start, start + size))))
        size *= 2
    return listing
