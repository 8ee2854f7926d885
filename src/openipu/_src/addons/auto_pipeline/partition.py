"""The pipeline partition search of auto_pipeline (the original's prediction/partition.py):
a dynamic program over layer ranges that minimises the slowest stage's cycles plus the
largest transfer cycles, with ranges that exceed the memory limit or split the uses of a
layer excluded (see the original's auto_pipeline_readme.md)."""

from __future__ import annotations

import numpy as np

from openipu._src.addons.auto_pipeline import profile_types

INF = int(1e16)


def get_model_cost_matrix(model_profile, mem_limit) -> np.ndarray:
    """`cost[i, j]`: the forward cycles of layers [i, j] as one stage, INF when they need more
    than `mem_limit` bytes or a layer among them is also called outside them."""
    names = model_profile["layerName"]
    n_layer = len(model_profile["layerInfo"])
    calls = {name: names.count(name) for name in names}
    range_cost = np.full((n_layer, n_layer), INF, dtype=np.int64)
    for start in range(n_layer):
        seen: set = set()
        calls_outside = 0
        range_info = profile_types.get_empty_range_info()
        for end in range(start, n_layer):
            if names[end] not in seen:
                seen.add(names[end])
                calls_outside += calls[names[end]]
            calls_outside -= 1
            profile_types.aggregate_info_inplace(range_info, model_profile["layerInfo"][end])
            if range_info["memory"]["totalMemory"] > mem_limit:
                break  # a longer range needs more memory still
            if calls_outside == 0:
                range_cost[start, end] = range_info["cycle"]["forward"]
    return range_cost


def get_transfer_cost_matrix(model_profile, cluster_info) -> np.ndarray:
    """`cost[ipu, i, j]`: the transfer cycles of IPU `ipu` running layers [i, j]."""
    n_ipu = len(cluster_info["connection"])
    n_layer = len(model_profile["layerInfo"])
    transfer_cost = np.full((n_ipu, n_layer, n_layer), INF, dtype=np.int64)
    for ipu in range(n_ipu):
        for start in range(n_layer):
            for end in range(start, n_layer):
                transfer_cost[ipu, start, end] = profile_types.transfer_cycle(
                    cluster_info, ipu, model_profile, start, end
                )
    return transfer_cost


def get_auto_pipeline_partition_by_cycle_and_transfer(model_profile, cluster_info, config):
    """The first layer of each of the `n_ipu` stages, then the layer count (`n_ipu + 1`
    integers), minimising the slowest stage's cycles plus the largest transfer cycles."""
    mem_limit = int(cluster_info["memory"] * config["memoryProportion"] * 1024**2)
    n_ipu = len(cluster_info["connection"])
    n_layer = len(model_profile["layerInfo"])
    range_cost = get_model_cost_matrix(model_profile, mem_limit)
    transfer_cost = get_transfer_cost_matrix(model_profile, cluster_info)
    # The third dimension of the states: a bound on any stage's transfer cycles.
    transfer_values = np.unique(transfer_cost)
    n_transfer = transfer_values.shape[0]
    cost = np.full((n_ipu, n_layer, n_transfer), INF, dtype=np.int64)
    came_from = np.full((n_ipu, n_layer, n_transfer), -1, dtype=np.int64)
    cost[0] = range_cost[0, :, np.newaxis]
    cost[0][transfer_cost[0, 0, :, np.newaxis] > transfer_values[np.newaxis, :]] = INF
    for ipu in range(1, n_ipu):
        for end in range(1, n_layer):
            candidates = np.maximum(
                cost[ipu - 1, 0:end, :], range_cost[1 : end + 1, end, np.newaxis]
            )
            over = transfer_cost[ipu, 1 : end + 1, end, np.newaxis] > transfer_values[np.newaxis, :]
            candidates[over] = INF
            best = np.argmin(candidates, axis=0)
            cost[ipu, end] = candidates[best, np.arange(n_transfer)]
            came_from[ipu, end] = best
    best_transfer = np.argmin(transfer_values + cost[n_ipu - 1, n_layer - 1, :])
    partition = [0] * (n_ipu + 1)
    layer = n_layer - 1
    for ipu in range(n_ipu, 0, -1):
        partition[ipu] = layer + 1
        layer = int(came_from[ipu - 1, layer, best_transfer])
    return partition
