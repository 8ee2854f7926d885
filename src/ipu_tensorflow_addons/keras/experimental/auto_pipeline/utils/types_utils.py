"""`auto_pipeline.utils.types_utils` (re-exports only)."""

from openipu._src.addons.auto_pipeline.profile_types import (
    aggregate_info_inplace,
    copy_layer_info,
    get_empty_layer_info,
    get_empty_range_info,
    transfer_cycle,
)

__all__ = [
    "aggregate_info_inplace",
    "copy_layer_info",
    "get_empty_layer_info",
    "get_empty_range_info",
    "transfer_cycle",
]
