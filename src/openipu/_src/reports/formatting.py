"""How the report shows numbers: bytes in binary units, cycles grouped, times at the clock."""

from __future__ import annotations

_BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"]


def format_bytes(count: float) -> str:
    """`624.0 KiB`, `897.0 MiB`: binary units, as Graphcore's tools state tile memory."""
    value, unit = float(count), 0
    while abs(value) >= 1024 and unit < len(_BYTE_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{int(value)} B" if unit == 0 else f"{value:.1f} {_BYTE_UNITS[unit]}"


def format_count(count: int) -> str:
    """`1,234,567`: the exact figure, grouped (cycles, FLOPs)."""
    return f"{count:,}"


def format_seconds(seconds: float) -> str:
    """`12.3 µs`, `4.56 ms`: the largest unit below the value, three significant figures."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_share(part: float, whole: float) -> str:
    """`42.0%` of `whole`, or `-` when there is no whole."""
    return f"{100.0 * part / whole:.1f}%" if whole else "-"
