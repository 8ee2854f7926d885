"""`ipu_tensorflow_addons.keras.experimental.auto_pipeline`: the partition search on model
profiles, against a brute force over every split; profiling, which needs Poplar's reports,
says so."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ipu_tensorflow_addons.keras.experimental.auto_pipeline.prediction import (
    partition,
    partition_evaluate,
)
from ipu_tensorflow_addons.keras.experimental.auto_pipeline.utils import profiler, types_utils

MB = 1024**2


def _layer(forward, memory, outputs, shared=None):
    info = types_utils.get_empty_layer_info()
    info["cycle"]["forward"] = forward
    info["memory"]["exclusive"] = {"parameter": memory}
    info["memory"]["shared"] = shared or {}
    info["memory"]["inputs"] = outputs
    info["memory"]["outputs"] = outputs
    return info


def _profile(cycles, memory, outputs, names=None):
    layers = [_layer(c, m, o) for c, m, o in zip(cycles, memory, outputs, strict=True)]
    return {
        "layerName": names or [f"layer{i}" for i in range(len(cycles))],
        "layerType": ["Dense"] * len(cycles),
        "layerInfo": layers,
    }


def _cluster(n_ipu):
    link = {"recvGBps": 1.0, "sendGBps": 1.0, "recvIdleCycle": 100, "sendIdleCycle": 100}
    return {"connection": [dict(link) for _ in range(n_ipu)], "clock": 1.33e9, "memory": 900}


CONFIG = {"memoryProportion": 0.85, "usePoplarEstimation": True}


def _brute_force(profile, cluster):
    """The least (slowest stage + largest transfer) over every split into len(IPUs) stages."""
    n_layer, n_ipu = len(profile["layerInfo"]), len(cluster["connection"])
    limit = int(cluster["memory"] * CONFIG["memoryProportion"] * MB)
    costs = partition.get_model_cost_matrix(profile, limit)
    best = None
    for cuts in itertools.combinations(range(1, n_layer), n_ipu - 1):
        bounds = [0, *cuts, n_layer]
        stages = list(zip(bounds[:-1], bounds[1:], strict=True))
        compute = max(int(costs[a, b - 1]) for a, b in stages)
        transfer = max(
            types_utils.transfer_cycle(cluster, ipu, profile, a, b - 1)
            for ipu, (a, b) in enumerate(stages)
        )
        total = compute + transfer
        if best is None or total < best[0]:
            best = (total, bounds)
    return best


def _objective(profile, cluster, bounds):
    limit = int(cluster["memory"] * CONFIG["memoryProportion"] * MB)
    costs = partition.get_model_cost_matrix(profile, limit)
    stages = list(zip(bounds[:-1], bounds[1:], strict=True))
    return max(int(costs[a, b - 1]) for a, b in stages) + max(
        types_utils.transfer_cycle(cluster, ipu, profile, a, b - 1)
        for ipu, (a, b) in enumerate(stages)
    )


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n_ipu", [2, 3])
def test_partition_is_optimal(seed, n_ipu):
    rng = np.random.default_rng(seed)
    n_layer = 7
    profile = _profile(
        cycles=rng.integers(1_000, 50_000, n_layer).tolist(),
        memory=(rng.integers(20, 200, n_layer) * MB).tolist(),
        outputs=(rng.integers(1, 64, n_layer) * 1024).tolist(),
    )
    cluster = _cluster(n_ipu)
    bounds = partition.get_auto_pipeline_partition_by_cycle_and_transfer(profile, cluster, CONFIG)
    assert len(bounds) == n_ipu + 1 and bounds[0] == 0 and bounds[-1] == n_layer
    assert bounds == sorted(bounds)
    expected, _ = _brute_force(profile, cluster)
    assert expected < partition.INF  # these profiles fit: every stage's memory is below the limit
    assert _objective(profile, cluster, bounds) == expected


def test_memory_limit_and_shared_layers_exclude_ranges():
    # Layers 1 and 3 are calls of the same layer: no stage may hold only one of them.
    profile = _profile([10, 10, 10, 10], [100 * MB] * 4, [1024] * 4, ["a", "b", "c", "b"])
    costs = partition.get_model_cost_matrix(profile, 250 * MB)
    assert costs[1, 2] == partition.INF  # splits the calls of "b"
    assert costs[0, 2] == partition.INF  # 300 MB > 250 MB
    assert costs[2, 2] == 10 and costs[0, 0] == 10
    profile = _profile([10, 10, 10, 10], [100 * MB] * 4, [1024] * 4, ["a", "b", "c", "b"])
    assert partition.get_model_cost_matrix(profile, 1000 * MB)[1, 3] == 30


def test_range_aggregation_counts_shared_memory_once():
    stage = types_utils.get_empty_range_info()
    for _ in range(2):
        layer = _layer(5, 10, 0, shared={"vertexCode_dense": 7})
        types_utils.aggregate_info_inplace(stage, layer)
    assert stage["cycle"]["forward"] == 10
    assert stage["memory"]["totalMemory"] == 2 * 10 + 7


@pytest.mark.parametrize(
    "function",
    [
        lambda: partition.create_model_profile(lambda: None, 1, CONFIG),
        lambda: partition_evaluate.profile_pipelined_model(lambda: None, 1, [], CONFIG),
        lambda: profiler.create_strategy(1, None),
    ],
)
def test_profiling_needs_poplar_reports(function):
    with pytest.raises(NotImplementedError, match="Poplar's compilation and execution reports"):
        function()
