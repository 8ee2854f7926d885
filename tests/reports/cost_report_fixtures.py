"""CostReport dicts built by hand, shaped like the estimator's (for the report tests).

`make_report(ipus=2, stages=2)` is a pipelined training program on Mk2 IPUs (1472 tiles of
624 KiB; `chip="ipu1"` for Mk1's 1216 of 256 KiB): per-IPU memory categories that sum to the total, 1472 per-tile figures summing to
it too, a liveness curve over each IPU's ops, ops spread over the stages, and the largest
tensors. `fits=False` makes IPU 0 overflow (some tiles over their 624 KiB).
"""

from __future__ import annotations

import random

#: Tiles, bytes per tile and clock of each IPU version (Mk1 GC2, Mk2 GC200, Bow).
CHIPS = {
    "ipu1": (1216, 256 * 1024, 1.6e9),
    "ipu2": (1472, 624 * 1024, 1.325e9),
    "ipu21": (1472, 624 * 1024, 1.85e9),
}

OP_TYPES = ["MatMul", "Conv2D", "Add", "Relu", "Softmax", "LayerNorm", "Gelu", "Reshape"]


def make_report(
    ipus: int = 1,
    stages: int | None = None,
    ops_per_ipu: int = 30,
    fits: bool = True,
    name: str = "training_step",
    seed: int = 0,
    chip: str = "ipu2",
) -> dict:
    """A CostReport for a program of `ipus` IPUs per replica, one pipeline stage per IPU."""
    rng = random.Random(seed)
    stages = ipus if stages is None else stages
    ops = _ops(rng, ipus, stages, ops_per_ipu)
    tiles, bytes_per_tile, clock_hz = CHIPS[chip]
    memories = [
        _ipu_memory(rng, index, ops, tiles, bytes_per_tile, overflow=not fits and index == 0)
        for index in range(ipus)
    ]
    per_stage = [sum(op["cycles"] for op in ops if op["stage"] == stage) for stage in range(stages)]
    compute = sum(op["cycles"] for op in ops)
    exchange, sync, host_io = compute // 5, compute // 40, 12_000 + 100 * seed
    collectives = 0 if ipus == 1 else 35_000
    bubble = 0 if stages == 1 else max(per_stage) * (stages - 1)
    per_step = max(per_stage) + exchange // stages + sync + collectives // 4
    steps = 16
    return {
        "program": {
            "name": name,
            "executor": "xla",
            "host_device": "/device:CPU:0",
            "ipu_ordinal": 0,
            "replicas": 1,
            "ipus_per_replica": ipus,
            "steps_per_call": steps,
            "step_schedule": "LOOP",
            "steps_per_group": 4 if stages > 1 else 1,
        },
        "chip": {
            "version": chip,
            "tiles": tiles,
            "bytes_per_tile": bytes_per_tile,
            "clock_hz": clock_hz,
        },
        "options": {"available_memory_proportion": 0.6, "partials_type": "half"},
        "ipus": memories,
        "cycles": {
            "compute": compute,
            "exchange": exchange,
            "sync": sync,
            "host_io": host_io,
            "collectives": collectives,
            "pipeline_bubble": bubble,
            "per_step": per_step,
            "per_call": per_step * steps + bubble + host_io,
            "per_stage": per_stage,
        },
        "ops": ops,
        "largest_tensors": _largest_tensors(rng, ipus),
        "fits": fits,
    }


def _ops(rng: random.Random, ipus: int, stages: int, per_ipu: int) -> list[dict]:
    ops = []
    for ipu in range(ipus):
        for position in range(per_ipu):
            kind = OP_TYPES[rng.randrange(len(OP_TYPES))]
            flops = rng.randrange(10_000, 50_000_000) if kind in ("MatMul", "Conv2D") else 0
            ops.append(
                {
                    # "<" and "&" in names: the page must escape what it shows.
                    "name": f"stage{ipu}/layer_{position}/{kind.lower()}<{position}>&x",
                    "type": kind,
                    "ipu": ipu,
                    "stage": ipu * stages // ipus,
                    "flops": flops,
                    "cycles": flops // 64 + rng.randrange(200, 20_000),
                    "output_bytes": rng.randrange(1_024, 4_000_000),
                }
            )
    return ops


def _ipu_memory(
    rng: random.Random,
    index: int,
    ops: list[dict],
    tiles: int,
    bytes_per_tile: int,
    overflow: bool,
) -> dict:
    capacity = tiles * bytes_per_tile
    scale = 1.08 if overflow else rng.uniform(0.35, 0.8)
    shares = {
        "weights": 0.30,
        "optimizer_state": 0.20,
        "activations": 0.25,
        "gradient_accumulators": 0.08,
        "streams": 0.03,
        "exchange": 0.05,
        "code": 0.06,
        "temporaries": 0.03,
    }
    categories = {name: int(capacity * scale * share) for name, share in shares.items()}
    total = sum(categories.values())
    categories["remote_buffers"] = 50_000_000  # off chip: not part of the total
    tile_bytes = _tile_bytes(rng, total, tiles)
    own_ops = [op for op in ops if op["ipu"] == index]
    live, liveness = total - categories["activations"], []
    for position, op in enumerate(own_ops):
        live += op["output_bytes"] if position < len(own_ops) // 2 else -op["output_bytes"] // 2
        liveness.append(max(live, 0))
    return {
        "index": index,
        "categories": categories,
        "total_bytes": total,
        "capacity_bytes": capacity,
        "tile_bytes": tile_bytes,
        "liveness": liveness,
    }


def _tile_bytes(rng: random.Random, total: int, tiles: int) -> list[int]:
    """`tiles` figures summing to `total`, uneven as a real tile mapping is."""
    weights = [rng.uniform(0.7, 1.3) for _ in range(tiles)]
    scale = total / sum(weights)
    tiles = [int(weight * scale) for weight in weights]
    tiles[-1] += total - sum(tiles)
    return tiles


def _largest_tensors(rng: random.Random, ipus: int) -> list[dict]:
    kinds = ["variable", "activation", "optimizer_state", "accumulator", "stream"]
    tensors = [
        {
            "name": f"encoder/layer_{i}/{kind}",
            "kind": kind,
            "ipu": i % ipus,
            "bytes": rng.randrange(1_000_000, 60_000_000),
        }
        for i, kind in enumerate(kinds * 2)
    ]
    return sorted(tensors, key=lambda tensor: -tensor["bytes"])
