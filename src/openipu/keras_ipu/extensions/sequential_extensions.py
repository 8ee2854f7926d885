"""`tf.keras.ipu.extensions.sequential_extensions` (re-exports only)."""

from openipu._src.keras.extensions.extension_kinds import SequentialExtension
from openipu._src.keras.extensions.pipeline_stages import (
    SequentialLayerPipelineStageAssignment,
    SequentialNestedModelPipelineStageAssignment,
)

__all__ = [
    "SequentialExtension",
    "SequentialLayerPipelineStageAssignment",
    "SequentialNestedModelPipelineStageAssignment",
]
