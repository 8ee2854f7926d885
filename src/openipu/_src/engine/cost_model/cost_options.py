"""The options that change what a program costs on the chip, read from the configuration.

Each is a knob that the original passes to Poplar and that matters on the hardware:
the IPU version and tiles, the matrix units' available memory proportion and partials
type, I/O tiles, stochastic rounding, recomputation, offloaded optimizer state, the
pipeline schedule, and whether an out-of-memory program may compile anyway.
"""

from __future__ import annotations

import dataclasses

from openipu._src.engine.cost_model import engine_options

_DEFAULT_AMP = 0.6  # PopLibs' default availableMemoryProportion for matmuls and convolutions


@dataclasses.dataclass(frozen=True)
class CostOptions:
    version: str = "ipu2"
    tiles: int = 0  # 0: the version's standard tile count
    available_memory_proportion: float = _DEFAULT_AMP
    partials_half: bool = False  # partials_type "half" (fp16) rather than "float"
    num_io_tiles: int = 0
    stochastic_rounding: bool = False
    recomputation: bool = False
    offload_optimizer_state: bool = False
    pipeline_schedule: str = "Grouped"  # Grouped, Interleaved, Sequential
    gradient_accumulation_count: int = 1
    allow_out_of_memory: bool = False
    # ipu_model.compile_ipu_code: without compiled IPU code no code occupies the tiles.
    compile_ipu_code: bool = True
    # PopART's outlining (SessionOptions.enableOutlining): identical operations become one
    # subgraph called where each ran, so operations of the same type on the same sizes
    # share their code.
    outlining: bool = False
    # Variables a front end keeps in streaming memory (remote buffers, off the tiles) and
    # those it shards across the replicas (each holds 1/count): by variable name.
    remote_variables: tuple[str, ...] = ()
    sharded_variables: tuple[str, ...] = ()
    sharding_replicas: int = 1

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _proportion(options: dict[str, object]) -> float | None:
    value = options.get("availableMemoryProportion")
    try:
        return None if value is None else float(str(value))
    except ValueError:
        return None


def _partials_half(options: dict[str, object]) -> bool:
    return str(options.get("partialsType", "")).lower() in {"half", "float16"}


def engine_options_allow_out_of_memory() -> bool:
    """POPLAR_ENGINE_OPTIONS asks to compile programs that do not fit (see engine_options)."""
    return engine_options.allow_out_of_memory(engine_options.poplar_engine_options())


def from_config(config: object | None, **overrides: object) -> CostOptions:
    """The cost options an `IPUConfig` sets (None: the defaults), with `overrides`."""
    values: dict[str, object] = {"allow_out_of_memory": engine_options_allow_out_of_memory()}
    if config is not None:
        model = getattr(config, "ipu_model", None)
        connection = getattr(config, "device_connection", None)
        version = getattr(connection, "version", "") or getattr(model, "version", "") or "ipu2"
        values["version"] = version
        values["tiles"] = int(getattr(model, "tiles_per_ipu", 0) or 0)
        values["compile_ipu_code"] = bool(getattr(model, "compile_ipu_code", True))
        matmuls = dict(getattr(getattr(config, "matmuls", None), "poplar_options", {}) or {})
        convolutions = dict(
            getattr(getattr(config, "convolutions", None), "poplar_options", {}) or {}
        )
        proportion = _proportion(matmuls) or _proportion(convolutions)
        if proportion is not None:
            values["available_memory_proportion"] = proportion
        values["partials_half"] = _partials_half(matmuls) or _partials_half(convolutions)
        io_tiles = getattr(config, "io_tiles", None)
        values["num_io_tiles"] = int(getattr(io_tiles, "num_io_tiles", 0) or 0)
        floating = getattr(config, "floating_point_behaviour", None)
        rounding = getattr(floating, "esr", None)
        values["stochastic_rounding"] = bool(rounding) and str(rounding).upper().find("OFF") < 0
        values["recomputation"] = bool(getattr(config, "allow_recompute", False))
    values.update(overrides)
    return CostOptions(**values)  # type: ignore[arg-type] # the fields above
