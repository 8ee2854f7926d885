"""The chip a PopART session's device models, for the engine's cost model.

IPU and IPU Model devices have one (their tiles and IPU version, `createIpuModelDevice`'s
`tilesPerIPU` and `ipuVersion`); the CPU device has none, so its programs are not
checked against a chip's memory. `engineOptions["debug.allowOutOfMemory"] = "true"`
compiles a program that does not fit, as Poplar's option does.
"""

from __future__ import annotations

from typing import Any

from openipu._src.engine.cost_model import chip, cost_options
from openipu._src.popart.devices.device_info import DeviceInfo
from openipu._src.popart.devices.enums import DeviceType
from openipu._src.popart.session.tensor_locations import ResolvedLocation
from openipu._src.popart.session.weights import variable_name


def chip_options(
    device: DeviceInfo,
    options: Any,
    locations: dict[str, ResolvedLocation] | None = None,
) -> cost_options.CostOptions | None:
    """The cost options of `device` under SessionOptions `options` (None: no chip), with
    the variables kept off chip or sharded (by their TensorFlow variable names)."""
    if device.type is DeviceType.Cpu:
        return None
    locations = locations or {}
    version = device.version if device.version in chip.VERSIONS else "ipu2"
    engine = dict(options.engineOptions)
    allow = str(engine.get("debug.allowOutOfMemory", "")).lower() == "true"
    accumulation = options.accumulationFactor if options.enableGradientAccumulation else 1
    return cost_options.CostOptions(
        version=version,
        tiles=int(device.tilesPerIPU or 0),
        allow_out_of_memory=allow or cost_options.engine_options_allow_out_of_memory(),
        gradient_accumulation_count=max(int(accumulation), 1),
        outlining=bool(options.enableOutlining),
        num_io_tiles=int(getattr(options, "numIOTiles", 0) or 0),
        remote_variables=tuple(
            variable_name(name) for name, where in locations.items() if where.off_chip
        ),
        sharded_variables=tuple(
            variable_name(name) for name, where in locations.items() if where.sharded
        ),
        sharding_replicas=int(options.getReplicationFactor()),
    )
