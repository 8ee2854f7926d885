"""`tf.keras.ipu.extensions`: the IPU extensions of Keras models (re-exports only)."""

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
