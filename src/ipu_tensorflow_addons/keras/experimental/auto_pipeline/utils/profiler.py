"""`auto_pipeline.utils.profiler` (re-exports only): profiling needs Poplar's reports and
raises saying so."""

from openipu._src.addons.auto_pipeline.profiling import (
    create_strategy,
    profile_layer_from_assignment,
)

__all__ = ["create_strategy", "profile_layer_from_assignment"]
