"""`CostEstimate`: what a compiled program would use and take on real IPUs.

`estimate(workload, ...)` combines the memory model (`memory`) and the cycle model
(`cycles`) for one replica of a program; `to_report()` gives the plain-data form that
reports and JSON files hold (`report_schema.CostReport`).
"""

from __future__ import annotations

import dataclasses

from openipu._src.engine.cost_model import cycles as cycles_lib
from openipu._src.engine.cost_model import memory as memory_lib
from openipu._src.engine.cost_model.chip import Chip, chip
from openipu._src.engine.cost_model.cost_options import CostOptions
from openipu._src.engine.cost_model.report_schema import CostReport
from openipu._src.engine.cost_model.workload import Workload


@dataclasses.dataclass(frozen=True)
class CostEstimate:
    """The memory of each IPU of one replica and the cycles of one step and one call."""

    workload: Workload
    chip: Chip
    options: CostOptions
    replicas: int
    steps_per_call: int
    memory: list[memory_lib.IpuMemory]
    cycles: cycles_lib.StepCycles

    @property
    def fits(self) -> bool:
        return all(max(ipu.tile_bytes) <= self.chip.bytes_per_tile for ipu in self.memory)

    @property
    def cycles_per_call(self) -> int:
        return self.cycles.per_step * self.steps_per_call

    def seconds_per_call(self) -> float:
        return self.cycles_per_call / self.chip.clock_hz

    def largest_tensors(self, count: int = 20) -> list[tuple[str, str, int, int]]:
        """(name, kind, ipu, bytes) of the largest variables and peak activations."""
        entries = [(v.name, v.kind.value, v.ipu, v.bytes) for v in self.workload.variables]
        for ipu in self.memory:
            entries += [(name, "activation", ipu.index, size) for name, size in ipu.live_at_peak]
        return sorted(entries, key=lambda e: -e[3])[:count]

    def summary(self) -> str:
        """A text summary in the spirit of the original's summary reports."""
        lines = [
            f"Target: {self.chip.version}, {self.chip.tiles} tiles of "
            f"{self.chip.bytes_per_tile} bytes, {self.chip.clock_hz / 1e9:.2f} GHz",
            f"Replicas: {self.replicas}, IPUs per replica: {len(self.memory)}",
        ]
        for ipu in self.memory:
            tile, most = ipu.largest_tile
            lines.append(
                f"IPU {ipu.index}: {ipu.total_bytes} of {ipu.capacity_bytes} bytes "
                f"({100 * ipu.total_bytes / ipu.capacity_bytes:.1f}%); fullest tile {tile} "
                f"with {most} bytes"
            )
            for category, size in sorted(ipu.categories.items(), key=lambda kv: -kv[1]):
                lines.append(f"  {category}: {size}")
        c = self.cycles
        lines += [
            f"Cycles per step: {c.per_step} (compute {c.compute}, exchange {c.exchange}, "
            f"sync {c.sync}, collectives {c.collectives}, host I/O {c.host_io}, "
            f"pipeline bubble {c.pipeline_bubble}; recomputation {c.recomputation} of these)",
            f"Cycles per call ({self.steps_per_call} steps): {self.cycles_per_call} "
            f"({self.seconds_per_call() * 1e3:.3f} ms)",
            "Fits in memory: " + ("yes" if self.fits else "NO"),
        ]
        return "\n".join(lines)

    def to_report(self, program: dict[str, object] | None = None) -> CostReport:
        top_ops = sorted(self.cycles.operations, key=lambda c: -c.total)[:200]
        return {
            "program": dict(program or {}),
            "chip": self.chip.as_dict(),  # type: ignore[typeddict-item] # same keys
            "options": self.options.as_dict(),
            "ipus": [
                {
                    "index": ipu.index,
                    "categories": dict(ipu.categories),
                    "total_bytes": ipu.total_bytes,
                    "capacity_bytes": ipu.capacity_bytes,
                    "tile_bytes": list(ipu.tile_bytes),
                    "liveness": list(ipu.liveness),
                }
                for ipu in self.memory
            ],
            "cycles": {
                "compute": self.cycles.compute,
                "exchange": self.cycles.exchange,
                "sync": self.cycles.sync,
                "host_io": self.cycles.host_io,
                "collectives": self.cycles.collectives,
                "pipeline_bubble": self.cycles.pipeline_bubble,
                "per_step": self.cycles.per_step,
                "per_call": self.cycles_per_call,
                "per_stage": list(self.cycles.per_stage),
            },
            "ops": [
                {
                    "name": c.operation.name,
                    "type": c.operation.type,
                    "ipu": c.operation.ipu,
                    "stage": c.operation.ipu,
                    "flops": c.operation.flops * c.operation.repeats,
                    "cycles": c.total,
                    "output_bytes": c.operation.output_bytes,
                }
                for c in top_ops
            ],
            "largest_tensors": [
                {"name": name, "kind": kind, "ipu": ipu, "bytes": size}
                for name, kind, ipu, size in self.largest_tensors()
            ],
            "fits": self.fits,
        }


def _is_training(workload: Workload) -> bool:
    return any(
        op.type.startswith(("ResourceApply", "AssignSub", "AssignAdd"))
        for op in workload.operations
    )


def estimate(
    workload: Workload,
    options: CostOptions | None = None,
    replicas: int = 1,
    steps_per_call: int = 1,
) -> CostEstimate:
    options = options or CostOptions()
    if workload.pipeline_schedule:
        # The pipeline's own schedule and accumulation count, as it declared them.
        options = dataclasses.replace(
            options,
            pipeline_schedule=workload.pipeline_schedule,
            gradient_accumulation_count=max(workload.gradient_accumulation_count, 1),
        )
    if workload.offload_optimizer_state:
        options = dataclasses.replace(options, offload_optimizer_state=True)
    figures = chip(options.version, options.tiles)
    memory = memory_lib.per_ipu(workload, figures, options)
    cycles = cycles_lib.step_cycles(workload, figures, options, replicas, _is_training(workload))
    return CostEstimate(workload, figures, options, replicas, steps_per_call, memory, cycles)
