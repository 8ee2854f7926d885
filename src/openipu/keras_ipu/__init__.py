"""`tf.keras.ipu`: pipeline-stage helpers of Keras on the IPU (re-exports only)."""

from openipu._src.keras.extensions.pipeline_stages import (
    FunctionalLayerPipelineStageAssignment,
    FunctionalNestedModelPipelineStageAssignment,
    ModelLayerPipelineStageAssignment,
    NestedModelPipelineStageAssignment,
    PipelineStage,
    SequentialLayerPipelineStageAssignment,
)
from openipu._src.keras.extensions.replicated_metrics import ReplicatedMetricReductionMethod

__all__ = [
    "FunctionalLayerPipelineStageAssignment",
    "FunctionalNestedModelPipelineStageAssignment",
    "ModelLayerPipelineStageAssignment",
    "NestedModelPipelineStageAssignment",
    "PipelineStage",
    "ReplicatedMetricReductionMethod",
    "SequentialLayerPipelineStageAssignment",
]
