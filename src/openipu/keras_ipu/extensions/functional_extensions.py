"""`tf.keras.ipu.extensions.functional_extensions` (re-exports only)."""

from openipu._src.keras.extensions.extension_kinds import FunctionalExtension
from openipu._src.keras.extensions.pipeline_stages import (
    FunctionalLayerPipelineStageAssignment,
    FunctionalNestedModelPipelineStageAssignment,
)

__all__ = [
    "FunctionalExtension",
    "FunctionalLayerPipelineStageAssignment",
    "FunctionalNestedModelPipelineStageAssignment",
]
