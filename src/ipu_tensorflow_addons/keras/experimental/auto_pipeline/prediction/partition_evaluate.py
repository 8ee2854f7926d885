"""`auto_pipeline.prediction.partition_evaluate` (re-exports only): stage profiles estimated
from layer profiles; profiling a pipelined model needs Poplar's reports and raises saying so."""

from openipu._src.addons.auto_pipeline.profiling import (
    parse_pipelined_model_profile,
    profile_pipelined_model,
)
from openipu._src.addons.auto_pipeline.stage_estimate import estimate_pipelined_model_profile

__all__ = [
    "estimate_pipelined_model_profile",
    "parse_pipelined_model_profile",
    "profile_pipelined_model",
]
