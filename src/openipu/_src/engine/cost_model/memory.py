"""Memory of one replica's IPUs at the peak of a step, and how it spreads over the tiles.

Always live: the variables (weights, optimizer state, gradient accumulators), constants,
the program's code and each tile's runtime. At the peak: the activations live at the
worst point of the schedule (a tensor lives from the operation producing it to its last
reader), the temporaries of the largest matrix product or convolution (bounded by the
available memory proportion), exchange buffers and the stream buffers of one step.
Offloaded optimizer state lives in streaming memory, off the chip.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from openipu._src.engine.cost_model.chip import Chip
from openipu._src.engine.cost_model.cost_options import CostOptions
from openipu._src.engine.cost_model.workload import Operation, Variable, VariableKind, Workload

CODE_BYTES_PER_OPERATION = 1536  # instructions and vertex state of one operation's compute sets
RUNTIME_BYTES_PER_TILE = 16 * 1024  # control program, stacks and the tile's runtime
_SPREAD_GRAIN = 256  # a tensor is spread in pieces of at least this many bytes per tile
_RECOMPUTED_ACTIVATIONS = 0.5  # share of the activation peak left when recomputing


@dataclasses.dataclass(frozen=True)
class IpuMemory:
    index: int
    categories: dict[str, int]
    capacity_bytes: int
    tile_bytes: list[int]
    liveness: list[int]
    live_at_peak: list[tuple[str, int]]

    @property
    def total_bytes(self) -> int:
        return sum(v for k, v in self.categories.items() if k != "remote_buffers")

    @property
    def largest_tile(self) -> tuple[int, int]:
        """(tile, bytes) of the fullest tile."""
        tile = max(range(len(self.tile_bytes)), key=self.tile_bytes.__getitem__)
        return tile, self.tile_bytes[tile]


def _liveness(operations: list[Operation]) -> tuple[list[int], list[tuple[str, int]]]:
    """Live bytes after each operation, and the (50 largest) tensors live at the peak.

    The schedule is walked once for the curve, then again up to the peak for what is live
    there (sorting the live set at every new peak would cost a sort per operation of a
    forward pass, where the peak keeps rising).
    """
    last_use: dict[str, int] = {}
    for position, op in enumerate(operations):
        for tensor in op.inputs:
            last_use[tensor] = position

    def walk(until: int) -> tuple[list[int], dict[str, int]]:
        live: dict[str, int] = {}
        curve: list[int] = []
        current = 0
        for position, op in enumerate(operations[: until + 1]):
            if op.type not in {"ReadVariableOp", "Const"}:  # aliases of always-live data
                for tensor, size in op.outputs:
                    if size:
                        live[tensor] = size
                        current += size
            curve.append(current)
            if position == until:
                break
            for tensor, _ in op.outputs:
                if last_use.get(tensor, -1) <= position and tensor in live:
                    current -= live.pop(tensor)
            for tensor in op.inputs:
                if last_use.get(tensor) == position and tensor in live:
                    current -= live.pop(tensor)
        return curve, live

    curve, _ = walk(len(operations) - 1)
    if not curve:
        return curve, []
    peak_position = curve.index(max(curve))  # the first time the peak is reached
    _, live_at_peak = walk(peak_position)
    return curve, sorted(live_at_peak.items(), key=lambda kv: -kv[1])[:50]


def _spread(tile_bytes: np.ndarray, name: str, size: int, tiles: int) -> None:
    """Adds a tensor of `size` bytes over consecutive tiles from a name-dependent start."""
    if size <= 0:
        return
    pieces = max(1, min(tiles, size // _SPREAD_GRAIN))
    start = zlib.crc32(name.encode()) % tiles
    share, extra = divmod(size, pieces)
    amounts = np.full(pieces, share, np.int64)
    amounts[:extra] += 1
    positions = (start + np.arange(pieces)) % tiles
    np.add.at(tile_bytes, positions, amounts)


def _even(tile_bytes: np.ndarray, total: int, tiles: int) -> None:
    """Adds `total` bytes spread evenly over the first `tiles` tiles."""
    share, extra = divmod(total, tiles)
    tile_bytes[:tiles] += share
    tile_bytes[:extra] += 1


def _base_name(variable: Variable) -> str:
    """A variable's name without its replica scope and output index ("replica_1/W0:0": W0)."""
    return variable.name.split(":")[0].rsplit("/", 1)[-1]


def _is_remote(variable: Variable, options: CostOptions) -> bool:
    """Kept in streaming memory: off the tiles (a remote buffer)."""
    if variable.remote or _base_name(variable) in options.remote_variables:
        return True
    return variable.kind is VariableKind.OPTIMIZER_STATE and options.offload_optimizer_state


def _on_chip_share(variables: list[Variable], options: CostOptions) -> list[Variable]:
    """Each replica holds its 1/replicas share of a variable sharded across the replicas."""
    if options.sharding_replicas <= 1 or not options.sharded_variables:
        return variables
    return [
        dataclasses.replace(v, bytes=-(-v.bytes // options.sharding_replicas))
        if _base_name(v) in options.sharded_variables
        else v
        for v in variables
    ]


def per_ipu(workload: Workload, chip: Chip, options: CostOptions) -> list[IpuMemory]:
    tiles = chip.tiles
    compute_tiles = max(tiles - options.num_io_tiles, 1)
    results = []
    for ipu in range(max(workload.ipus_per_replica, 1)):
        operations = [op for op in workload.operations if op.ipu == ipu]
        variables = _on_chip_share([v for v in workload.variables if v.ipu == ipu], options)
        categories = {
            "weights": 0,
            "optimizer_state": 0,
            "gradient_accumulators": 0,
            "remote_buffers": 0,
        }
        for variable in variables:
            if _is_remote(variable, options):
                categories["remote_buffers"] += variable.bytes
            elif variable.kind is VariableKind.OPTIMIZER_STATE:
                categories["optimizer_state"] += variable.bytes
            elif variable.kind is VariableKind.ACCUMULATOR:
                categories["gradient_accumulators"] += variable.bytes
            else:
                categories["weights"] += variable.bytes
        curve, live_at_peak = _liveness(operations)
        activations = max(curve, default=0)
        if options.recomputation:
            activations = int(activations * _RECOMPUTED_ACTIVATIONS)
        categories["activations"] = activations
        constants = sum(b for op in operations if op.type == "Const" for _, b in op.outputs)
        categories["constants"] = constants
        partial_bytes = 2 if options.partials_half else 4
        heavy = [op for op in operations if op.matmul]
        largest = max((op.input_bytes + op.output_bytes for op in heavy), default=0)
        temporaries_limit = int(options.available_memory_proportion * compute_tiles
                                * chip.bytes_per_tile)  # fmt: skip
        # Partials are kept at their own precision: fp32 partials of fp16 work take twice.
        temporaries = min(largest * partial_bytes // 4 * (2 if heavy and heavy[0].half else 1),
                          temporaries_limit)  # fmt: skip
        categories["temporaries"] = temporaries
        categories["exchange"] = max((op.input_bytes for op in operations), default=0) // 4
        categories["streams"] = workload.stream_bytes_per_step if ipu == 0 else 0
        # The IPU model told not to compile IPU code (ipu_model.compile_ipu_code False) holds
        # no operation code on the tiles; the runtime stays.
        code = CODE_BYTES_PER_OPERATION * len({_code_key(op, options) for op in operations})
        code = code if options.compile_ipu_code else 0
        categories["code"] = code + RUNTIME_BYTES_PER_TILE * tiles

        tile_bytes = np.full(tiles, RUNTIME_BYTES_PER_TILE, np.int64)
        for variable in variables:
            if not _is_remote(variable, options):
                _spread(tile_bytes, variable.name, variable.bytes, compute_tiles)
        for name, size in live_at_peak:
            scale = _RECOMPUTED_ACTIVATIONS if options.recomputation else 1.0
            _spread(tile_bytes, name, int(size * scale), compute_tiles)
        for total in (constants, temporaries, categories["exchange"], code):
            _even(tile_bytes, total, compute_tiles)
        if options.num_io_tiles:
            # Stream buffers land on the I/O tiles (the last ones).
            tile_bytes[compute_tiles:] += categories["streams"] // options.num_io_tiles
        else:
            _spread(tile_bytes, "streams", categories["streams"], compute_tiles)
        results.append(
            IpuMemory(
                index=ipu,
                categories=categories,
                capacity_bytes=chip.capacity_bytes,
                tile_bytes=[int(b) for b in tile_bytes],
                liveness=curve,
                live_at_peak=live_at_peak,
            )
        )
    return results


def _code_key(op: Operation, options: CostOptions) -> tuple[object, ...]:
    """What tells operations with code of their own apart: each operation, or with outlining
    its type and sizes (outlined copies call one subgraph; PopART matches operations by
    type, attributes and tensor infos: willow/src/op.cpp, getSubgraphEquivId)."""
    if options.outlining:
        return (op.type, op.flops, op.input_bytes, op.output_bytes, op.matmul, op.half)
    return (op.type, op.name)
