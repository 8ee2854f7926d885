"""`auto_pipeline.utils.keras_utils` (re-exports only)."""

from openipu._src.addons.auto_pipeline.layer_invocations import (
    get_assignment_layer_type,
    parse_model_intermediate,
    prepend_batchsize,
    tf_nested_map_structure_all_tensor,
    tf_nested_map_structure_tensor,
    tf_tensor_size,
)

__all__ = [
    "get_assignment_layer_type",
    "parse_model_intermediate",
    "prepend_batchsize",
    "tf_nested_map_structure_all_tensor",
    "tf_nested_map_structure_tensor",
    "tf_tensor_size",
]
