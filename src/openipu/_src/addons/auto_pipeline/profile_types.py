"""Model profiles of auto_pipeline: empty profiles, aggregation of layers into a pipeline
stage and the transfer cycles of a stage (the original's utils/types_utils.py)."""

from __future__ import annotations

import copy


def _empty_cycles() -> dict:
    return {"forward": 0, "backward": 0, "total": 0}


def get_empty_layer_info() -> dict:
    """An empty analyzed layer profile (`LayerInfo`)."""
    memory = {"shared": {}, "exclusive": {}, "inputs": 0, "outputs": 0, "maxTemporary": 0}
    return {"cycle": _empty_cycles(), "memory": {**memory, "curCarryOver": 0, "curActivation": 0}}


def get_empty_range_info() -> dict:
    """An empty pipeline stage profile (`RangeInfo`)."""
    memory = {"shared": {}, "exclusive": {}, "maxTemporary": 0, "curActivation": 0}
    return {"cycle": _empty_cycles(), "memory": {**memory, "totalMemory": 0}}


def copy_layer_info(info: dict) -> dict:
    return copy.deepcopy(info)


def transfer_cycle(cluster_info, ipu_id, model_profile, range_start, range_end) -> int:
    """Cycles for IPU `ipu_id` to exchange data when it runs layers [range_start, range_end],
    IPU-to-IPU and host exchanges included."""
    connection = cluster_info["connection"]
    layers = model_profile["layerInfo"]

    def cycles(ipu, direction: str, size: int) -> int:
        bytes_per_clock = (connection[ipu][f"{direction}GBps"] * 1024**3) / cluster_info["clock"]
        return int(connection[ipu][f"{direction}IdleCycle"] + size / bytes_per_clock)

    n_ipu = len(connection)
    cycle = 0
    if ipu_id != 0:
        cycle += cycles(ipu_id, "recv", layers[range_start]["memory"]["inputs"])
    if ipu_id != n_ipu - 1:
        cycle += cycles(ipu_id, "send", layers[range_end]["memory"]["outputs"])
    cycle += cycles(0, "recv", layers[0]["memory"]["inputs"])
    cycle += cycles(n_ipu - 1, "send", layers[-1]["memory"]["outputs"])
    return cycle


def aggregate_info_inplace(range_info: dict, layer_info: dict) -> dict:
    """`range_info` updated to include the next layer, `layer_info`."""
    range_cycle, layer_cycle = range_info["cycle"], layer_info["cycle"]
    range_memory, layer_memory = range_info["memory"], layer_info["memory"]
    range_cycle["forward"] += layer_cycle["forward"]
    range_cycle["backward"] += layer_cycle["backward"]
    range_memory.setdefault("inputs", layer_memory["inputs"])
    range_memory["outputs"] = layer_memory["outputs"]
    new_max_temporary = (
        layer_memory["maxTemporary"] + layer_memory["curCarryOver"] + range_memory["curActivation"]
    )
    if new_max_temporary > range_memory["maxTemporary"]:
        range_memory["totalMemory"] += new_max_temporary - range_memory["maxTemporary"]
        range_memory["maxTemporary"] = new_max_temporary
    range_memory["curActivation"] += layer_memory["curActivation"]
    for name, size in layer_memory["shared"].items():
        if name not in range_memory["shared"]:
            range_memory["shared"][name] = size
            range_memory["totalMemory"] += size
    for name, size in layer_memory["exclusive"].items():
        range_memory["exclusive"][name] = range_memory["exclusive"].get(name, 0) + size
        range_memory["totalMemory"] += size
    return range_info
