"""The published figures of each IPU version that the cost model works from.

Sources (cited in docs/cost-model.md): Graphcore's product briefs for the GC2 (Mk1),
GC200 (Mk2) and Bow IPU, and Jia et al., "Dissecting the Graphcore IPU Architecture via
Microbenchmarking" (Citadel, 2019) for the measured per-tile rates of the Mk1.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Chip:
    """One IPU version: tiles, memory, clock and the rates the cost model charges."""

    version: str
    tiles: int
    bytes_per_tile: int
    clock_hz: float
    # Accumulating matrix product units: multiply-adds per cycle per tile.
    half_macs_per_cycle: int  # fp16 inputs (fp16 or fp32 partials: see partials_factor)
    float_macs_per_cycle: int  # fp32 inputs
    vector_flops_per_cycle: int  # elementwise work per tile per cycle (fp32 SIMD width)
    exchange_bytes_per_cycle: int  # what one tile sends or receives per cycle on chip
    ipu_link_bytes_per_second: float  # all IPU-Links of one chip together
    host_bytes_per_second: float  # host link (PCIe / gateway) of one chip
    sync_cycles: int  # one bulk-synchronous step (compute set + exchange barrier)

    @property
    def capacity_bytes(self) -> int:
        return self.tiles * self.bytes_per_tile

    def as_dict(self) -> dict[str, object]:
        return {
            "version": self.version,
            "tiles": self.tiles,
            "bytes_per_tile": self.bytes_per_tile,
            "clock_hz": self.clock_hz,
        }


_CHIPS = {
    # Mk1 GC2: 1216 tiles, 256 KiB each (304 MiB), 1.6 GHz, 125 TFLOPS fp16 (AMP).
    "ipu1": Chip("ipu1", 1216, 256 * 1024, 1.6e9, 32, 8, 8, 4, 80e9, 16e9, 150),
    # Mk2 GC200: 1472 tiles, 624 KiB each (897 MiB), 1.33 GHz, 250 TFLOPS fp16, 62.5 fp32.
    "ipu2": Chip("ipu2", 1472, 624 * 1024, 1.33e9, 64, 16, 16, 8, 320e9, 32e9, 150),
    # Bow IPU: the GC200's tiles and memory at 1.85 GHz (350 TFLOPS fp16).
    "ipu21": Chip("ipu21", 1472, 624 * 1024, 1.85e9, 64, 16, 16, 8, 320e9, 32e9, 150),
}

VERSIONS = tuple(_CHIPS)


def chip(version: str = "ipu2", tiles: int = 0) -> Chip:
    """The figures of IPU `version` ("ipu1", "ipu2", "ipu21"; "" means "ipu2").

    `tiles` > 0 models a smaller IPU (IPUConfig.ipu_model.tiles_per_ipu).
    """
    figures = _CHIPS.get(version or "ipu2")
    if figures is None:
        raise ValueError(
            f"Unknown IPU version {version!r}: the cost model knows {', '.join(VERSIONS)}"
        )
    if tiles > 0:
        figures = dataclasses.replace(figures, tiles=tiles)
    return figures
