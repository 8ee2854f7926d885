"""`auto_pipeline.prediction.partition_evaluate` (re-exports only): both functions need
Poplar's reports and raise saying so."""

from openipu._src.addons.auto_pipeline.profiling import (
    parse_pipelined_model_profile,
    profile_pipelined_model,
)

__all__ = ["parse_pipelined_model_profile", "profile_pipelined_model"]
