"""The search for the configuration of highest throughput (the original's
prediction/max_throughput.py): grid search over some settings, binary search over others
(lists ordered from safest to fastest), each candidate profiled and partitioned.

Profiling a candidate needs Poplar's reports (`profiling.py`): here it raises
NotImplementedError saying so, and the search lets that error through rather than count
every candidate as failed and report an empty result. Other errors of a candidate (it does
not compile, no partition fits) rule that candidate out, as in the original.
"""

from __future__ import annotations

import copy
import pprint
from collections.abc import Callable
from typing import Any

from openipu._src.addons.auto_pipeline import partition, profiling

INF = int(1e16)


def get_pipeline_cost(pipeline_profile: list[dict], batch_size: int) -> int:
    """Average cycles per batch of a pipeline: its slowest stage, once per IPU, per batch."""
    slowest = max(stage["cycle"]["total"] for stage in pipeline_profile)
    return int(slowest * len(pipeline_profile) / batch_size)


class _Search:
    def __init__(self, binary, grid, create_args, create_model, create_dataset) -> None:
        self.binary = list(binary.items())
        self.grid = list(grid.items())
        self.create_args = create_args
        self.create_model = create_model
        self.create_dataset = create_dataset
        self.config: dict[str, Any] = {}
        self.best_cost = INF
        self.best_config: dict[str, Any] = {}
        self.best_partition: list[int] = []

    def grid_level(self, level: int) -> int:
        if level == len(self.grid):
            return self.binary_level(0)
        name, values = self.grid[level]
        best = INF
        for value in values:
            self.config[name] = value
            best = min(best, self.grid_level(level + 1))
        return best

    def binary_level(self, level: int) -> int:
        """The cost of the last candidate that worked, found by bisection: index 0 is assumed
        to work, and a working index moves the lower bound up."""
        if level == len(self.binary):
            return self.profile()
        name, values = self.binary[level]
        best, low, high = INF, 0, len(values)
        while low + 1 != high:
            middle = (low + high) // 2
            self.config[name] = values[middle]
            cost = self.binary_level(level + 1)
            if cost < INF:
                low, best = middle, cost
            else:
                high = middle
        return best

    def profile(self) -> int:
        args = self.create_args(**self.config)
        if args is None:
            return INF
        batch_size = args["batchSize"]
        print("=====Profiling the model=====")
        pprint.pprint(self.config)
        if len(args["clusterInfo"]["connection"]) == 1:
            stages = [0, 0]
        else:
            try:
                layers = profiling.create_model_profile(
                    self.create_model, batch_size, args["autoPipeConfig"], args["ipuConfig"]
                )
            except NotImplementedError:
                raise
            except Exception:  # noqa: BLE001 - any failure rules the candidate out
                print("Layer compilation failed.")
                return INF
            try:
                stages = partition.get_auto_pipeline_partition_by_cycle_and_transfer(
                    layers, args["clusterInfo"], args["autoPipeConfig"]
                )
            except Exception:  # noqa: BLE001
                print("Pipeline Partition Failed.")
                return INF
        try:
            stage_profiles = profiling.profile_pipelined_model(
                self.create_model, self.create_dataset, batch_size, stages, args["ipuConfig"]
            )
        except NotImplementedError:
            raise
        except Exception:  # noqa: BLE001
            print("Pipeline compilation failed.")
            return INF
        cost = get_pipeline_cost(stage_profiles, batch_size)
        if cost < self.best_cost:
            self.best_cost = cost
            self.best_config = copy.deepcopy(self.config)
            self.best_partition = stages
        print("Cost=", cost)
        return cost


def search_for_max_throughput(
    binary_search_configs: dict[str, list],
    grid_search_configs: dict[str, list],
    create_args: Callable[..., dict | None],
    create_model: Callable[[], Any],
    create_dataset: Callable[[int, int], Any] | None = None,
) -> tuple[dict[str, Any], list[int]]:
    """The best configuration found and its pipeline partition."""
    search = _Search(
        binary_search_configs, grid_search_configs, create_args, create_model, create_dataset
    )
    search.grid_level(0)
    print("Searching complete")
    print("Best Config:")
    pprint.pprint(search.best_config)
    print("Best Partition:")
    pprint.pprint(search.best_partition)
    print("Best Cost")
    print(search.best_cost)
    return search.best_config, search.best_partition
