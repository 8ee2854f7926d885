"""The plain-data form of a cost estimate: what reports, JSON files and the CLI read.

`CostEstimate.to_dict()` returns a `CostReport`; `openipu report` renders one (or a
directory of them) as HTML. Sizes are bytes, times are IPU clock cycles.
"""

from __future__ import annotations

from typing import TypedDict


class ChipFigures(TypedDict):
    version: str  # "ipu1" (Mk1, GC2), "ipu2" (Mk2, GC200), "ipu21" (Bow)
    tiles: int  # tiles per IPU
    bytes_per_tile: int
    clock_hz: float


class IpuMemory(TypedDict):
    index: int  # the IPU within one replica (0 .. ipus_per_replica - 1)
    categories: dict[str, int]  # weights, optimizer_state, activations, gradient_accumulators,
    # streams, exchange, code, temporaries, remote_buffers (off chip, not counted in total)
    total_bytes: int  # on-chip bytes at the peak
    capacity_bytes: int  # tiles x bytes_per_tile
    tile_bytes: list[int]  # bytes used on each tile (len == tiles)
    liveness: list[int]  # live bytes after each op of the schedule (this IPU's ops)


class OpCost(TypedDict):
    name: str
    type: str
    ipu: int
    stage: int  # pipeline stage (0 when not pipelined)
    flops: int
    cycles: int
    output_bytes: int


class TensorSize(TypedDict):
    name: str
    kind: str  # "variable", "activation", "stream", "accumulator", "optimizer_state"
    ipu: int
    bytes: int


class Cycles(TypedDict):
    compute: int
    exchange: int
    sync: int
    host_io: int
    collectives: int
    pipeline_bubble: int
    per_step: int  # one step (one batch, or one gradient-accumulation micro-batch)
    per_call: int  # one host call (steps per execution / batches per step)
    per_stage: list[int]  # per pipeline stage (one entry when not pipelined)


class CostReport(TypedDict):
    program: dict[str, object]  # CompiledProgram.to_dict()
    chip: ChipFigures
    options: dict[str, object]  # the options that changed the estimate, as given
    ipus: list[IpuMemory]
    cycles: Cycles
    ops: list[OpCost]
    largest_tensors: list[TensorSize]
    fits: bool
