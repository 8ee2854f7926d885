"""The profile of each pipeline stage estimated from the profiles of its layers (the
original's prediction/partition_evaluate.py `estimate_pipelined_model_profile`)."""

from __future__ import annotations

import functools

from openipu._src.addons.auto_pipeline import profile_types


def estimate_pipelined_model_profile(
    model_profile: dict, cluster_info: dict, partition: list[int]
) -> list[dict]:
    """One `RangeInfo` per stage; stage i runs layers [partition[i], partition[i + 1]).

    A stage's total cycles are its layers' forward cycles plus its data transfers.
    """
    layers = model_profile["layerInfo"]
    stages = [
        functools.reduce(
            profile_types.aggregate_info_inplace,
            layers[start:end],
            profile_types.get_empty_range_info(),
        )
        for start, end in zip(partition[:-1], partition[1:], strict=True)
    ]
    for ipu_id, stage in enumerate(stages):
        # The original passes the next stage's first layer as the range's end.
        transfer = profile_types.transfer_cycle(
            cluster_info, ipu_id, model_profile, partition[ipu_id], partition[ipu_id + 1]
        )
        stage["cycle"]["total"] = stage["cycle"]["forward"] + transfer
    return stages
