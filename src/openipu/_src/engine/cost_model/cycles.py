"""Cycles of one step on the chip: compute, exchange, synchronisation, transfers.

The IPU runs bulk-synchronous steps: each operation is a compute phase spread over the
tiles holding its data, an exchange phase moving its inputs between tiles, and a
synchronisation. Compute is charged at the share of the matrix units' rate that real
layers reach for matrix products and convolutions and at the vector rate otherwise, or at
the tiles' memory bandwidth when that is slower; a matrix product whose temporaries exceed
the available memory proportion is planned in serial slices. With recomputation, a
training step runs its forward pass twice. Collectives cross the IPU-Links, streams the
host link. Pipelines run their stages concurrently, paying a fill and drain bubble per
gradient-accumulation group (more with the interleaved and sequential schedules).
"""

from __future__ import annotations

import dataclasses
import math
import re

from openipu._src.engine.cost_model import op_flops
from openipu._src.engine.cost_model.chip import Chip
from openipu._src.engine.cost_model.cost_options import CostOptions
from openipu._src.engine.cost_model.workload import Operation, Workload

_BYTES_PER_TILE_CYCLE = 16  # a tile loads 2 x 64 bits per cycle
_ELEMENTS_PER_TILE = 64  # finer work than this does not spread further over tiles
_STOCHASTIC_ROUNDING_COST = 1.02
_MOVED_SHARE = {True: 0.5, False: 0.1}  # share of inputs exchanged: matmul/conv or not
# Matrix products and convolutions take this many times the cycles of the matrix units'
# peak rate: PopLibs reaches about a third of the peak in real layers, the rest lost to
# partitions that leave units idle, loading weights into the units, reducing partials
# across tiles and the vertices' overheads. Calibrated (docs/cost-model.md): the published
# ResNet-50, BERT-Large and BERT-Base training throughputs on Bow Pod16 all sit near a
# fifth of the chip's fp16 peak end to end; with their recomputation and vector work
# charged, a third of the peak for the matrix work matches each of the three within 5%.
MATMUL_CYCLES_PER_PEAK_CYCLE = 3
# The scopes TensorFlow builds gradients in (not a StopGradient op of the forward pass).
_GRADIENT_SCOPE = re.compile(r"(^|/)(gradients(_[0-9]+)?|gradient_tape)/")


@dataclasses.dataclass(frozen=True)
class OperationCycles:
    operation: Operation
    compute: int
    exchange: int
    sync: int

    @property
    def total(self) -> int:
        return (self.compute + self.exchange + self.sync) * self.operation.repeats


@dataclasses.dataclass(frozen=True)
class StepCycles:
    compute: int
    exchange: int
    sync: int
    host_io: int
    collectives: int
    pipeline_bubble: int
    per_stage: list[int]
    per_step: int
    operations: list[OperationCycles]
    recomputation: int = 0  # of the compute, exchange and sync: the forward pass run again


def operation_cycles(op: Operation, chip: Chip, options: CostOptions) -> OperationCycles:
    tiles = max(chip.tiles - options.num_io_tiles, 1)
    if op.type in op_flops.VIEWS or (op.flops == 0 and op.output_bytes == 0):
        return OperationCycles(op, 0, 0, 0)
    # Work spreads over the tiles holding the larger side: a reduction's input (a bias
    # gradient reads a whole activation to write one vector), a broadcast's output.
    elements = max(max(op.output_bytes, op.input_bytes) // (2 if op.half else 4), 1)
    used = max(1, min(tiles, math.ceil(elements / _ELEMENTS_PER_TILE)))
    if op.matmul:
        rate = 2 * (chip.half_macs_per_cycle if op.half else chip.float_macs_per_cycle)
        used = tiles  # PopLibs plans matrix products over the whole chip
    else:
        rate = chip.vector_flops_per_cycle * (2 if op.half else 1)
    compute = op.flops * (MATMUL_CYCLES_PER_PEAK_CYCLE if op.matmul else 1) / (used * rate)
    memory = (op.input_bytes + op.output_bytes) / (used * _BYTES_PER_TILE_CYCLE)
    cycles = max(compute, memory)
    if op.matmul:
        limit = options.available_memory_proportion * tiles * chip.bytes_per_tile
        needed = (op.input_bytes + op.output_bytes) * (1 if options.partials_half else 2)
        cycles *= max(1, math.ceil(needed / max(limit, 1)))
    if options.stochastic_rounding and op.half:
        cycles *= _STOCHASTIC_ROUNDING_COST
    moved = op.input_bytes * _MOVED_SHARE[op.matmul]
    exchange = moved / (tiles * chip.exchange_bytes_per_cycle)
    return OperationCycles(op, math.ceil(cycles), math.ceil(exchange), chip.sync_cycles)


def _all_reduce_cycles(size: int, replicas: int, chip: Chip) -> int:
    """A ring all-reduce over the IPU-Links: 2 (R - 1) / R of the bytes cross each link."""
    if replicas <= 1 or size <= 0:
        return 0
    seconds = 2 * (replicas - 1) / replicas * size / chip.ipu_link_bytes_per_second
    return math.ceil(seconds * chip.clock_hz)


def forward_operations(operations: tuple[Operation, ...]) -> int:
    """How many operations lead the schedule before the first gradient: the forward pass.

    Operations are in build order and gradients are built after the forward pass, under
    the scope TensorFlow gives them ("gradients/" in TF1, "gradient_tape/" in TF2).
    """
    for position, op in enumerate(operations):
        if _GRADIENT_SCOPE.search(op.name):
            return position
    return 0  # no gradient: nothing is recomputed


def step_cycles(
    workload: Workload, chip: Chip, options: CostOptions, replicas: int, training: bool
) -> StepCycles:
    costs = [operation_cycles(op, chip, options) for op in workload.operations]
    # Recomputation runs the forward pass again during the backward pass (the original
    # recomputes each stage's activations from its checkpoints: at most one more forward).
    recomputed = costs[: forward_operations(workload.operations)] if (
        training and options.recomputation) else []  # fmt: skip
    stages = max(workload.ipus_per_replica, 1)
    per_stage = [0] * stages
    for cost in costs + recomputed:
        per_stage[min(cost.operation.ipu, stages - 1)] += cost.total
    compute = sum(c.compute * c.operation.repeats for c in costs + recomputed)
    exchange = sum(c.exchange * c.operation.repeats for c in costs + recomputed)
    sync = sum(c.sync * c.operation.repeats for c in costs + recomputed)
    recomputation = sum(c.total for c in recomputed)
    # Gradients are all-reduced across replicas: the collectives the program asks for,
    # or, when the replicas' sums are built in the emulation's own ops, the trainable weights.
    collective_bytes = sum(op.collective_bytes * op.repeats for op in workload.operations)
    if not collective_bytes and training and replicas > 1:
        collective_bytes = sum(v.bytes for v in workload.variables if v.kind.value == "variable")
    collectives = _all_reduce_cycles(collective_bytes, replicas, chip)
    accumulation = max(options.gradient_accumulation_count, 1)
    if accumulation > 1 and training:
        collectives = math.ceil(collectives / accumulation)  # reduced once per group
    host_io = math.ceil(workload.stream_bytes_per_step / chip.host_bytes_per_second * chip.clock_hz)
    slowest = max(per_stage)
    if stages > 1:
        schedule = options.pipeline_schedule.lower()
        if schedule == "sequential":
            body, bubble = sum(per_stage), 0
        else:
            body = slowest
            ramp = 2 * (stages - 1) if training else stages - 1
            bubble = math.ceil(ramp * slowest / max(accumulation, stages))
            if schedule == "interleaved":
                bubble *= 2
        per_step = body + bubble + collectives + host_io
    else:
        bubble = 0
        per_step = slowest + collectives + host_io
    return StepCycles(
        compute=compute,
        exchange=exchange,
        sync=sync,
        host_io=host_io,
        collectives=collectives,
        pipeline_bubble=bubble,
        per_stage=per_stage,
        per_step=per_step,
        operations=costs,
        recomputation=recomputation,
    )
