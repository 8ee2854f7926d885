"""`auto_pipeline.prediction.max_throughput` (re-exports only): the search for the
configuration of highest throughput; profiling its candidates needs Poplar's reports."""

from openipu._src.addons.auto_pipeline.throughput_search import (
    INF,
    get_pipeline_cost,
    search_for_max_throughput,
)

__all__ = ["INF", "get_pipeline_cost", "search_for_max_throughput"]
