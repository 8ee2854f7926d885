"""`auto_pipeline.prediction.partition` (re-exports only)."""

from openipu._src.addons.auto_pipeline.partition import (
    INF,
    get_auto_pipeline_partition_by_cycle_and_transfer,
    get_model_cost_matrix,
    get_transfer_cost_matrix,
)
from openipu._src.addons.auto_pipeline.profiling import create_model_profile, parse_layer_profile

__all__ = [
    "INF",
    "create_model_profile",
    "get_auto_pipeline_partition_by_cycle_and_transfer",
    "get_model_cost_matrix",
    "get_transfer_cost_matrix",
    "parse_layer_profile",
]
