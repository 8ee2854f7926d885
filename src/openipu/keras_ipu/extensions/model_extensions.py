"""`tf.keras.ipu.extensions.model_extensions` (re-exports only)."""

from openipu._src.keras.extensions.extension_kinds import ModelExtension
from openipu._src.keras.extensions.pipeline_stages import (
    ModelLayerPipelineStageAssignment,
    NestedModelPipelineStageAssignment,
)

__all__ = [
    "ModelExtension",
    "ModelLayerPipelineStageAssignment",
    "NestedModelPipelineStageAssignment",
]
