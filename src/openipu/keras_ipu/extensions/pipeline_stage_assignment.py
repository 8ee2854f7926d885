"""`tf.keras.ipu.extensions.pipeline_stage_assignment` (re-exports only): `PipelineStage`
and the assignment records."""

from openipu._src.keras.extensions.pipeline_stages import (
    FunctionalLayerPipelineStageAssignment,
    FunctionalNestedModelPipelineStageAssignment,
    ModelLayerPipelineStageAssignment,
    NestedModelPipelineStageAssignment,
    PipelineStage,
    SequentialLayerPipelineStageAssignment,
    SequentialNestedModelPipelineStageAssignment,
)

__all__ = [
    "FunctionalLayerPipelineStageAssignment",
    "FunctionalNestedModelPipelineStageAssignment",
    "ModelLayerPipelineStageAssignment",
    "NestedModelPipelineStageAssignment",
    "PipelineStage",
    "SequentialLayerPipelineStageAssignment",
    "SequentialNestedModelPipelineStageAssignment",
]
