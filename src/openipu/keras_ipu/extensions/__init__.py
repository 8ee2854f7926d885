"""`tf.keras.ipu.extensions`: the IPU extensions of Keras models (re-exports only).

As the original's package, it also holds the modules of the three extension classes.
"""

from openipu._src.keras.extensions.extension_kinds import (
    FunctionalExtension,
    ModelExtension,
    SequentialExtension,
)
from openipu._src.keras.extensions.pipeline_stages import (
    FunctionalLayerPipelineStageAssignment,
    FunctionalNestedModelPipelineStageAssignment,
    ModelLayerPipelineStageAssignment,
    NestedModelPipelineStageAssignment,
    PipelineStage,
    SequentialLayerPipelineStageAssignment,
    SequentialNestedModelPipelineStageAssignment,
)
from openipu._src.keras.extensions.replicated_metrics import ReplicatedMetricReductionMethod

# The package's own modules, as the original's package has them.
from openipu.keras_ipu.extensions import extensions_base as extensions_base
from openipu.keras_ipu.extensions import functional_extensions as functional_extensions
from openipu.keras_ipu.extensions import model_extensions as model_extensions
from openipu.keras_ipu.extensions import pipeline_stage_assignment as pipeline_stage_assignment
from openipu.keras_ipu.extensions import sequential_extensions as sequential_extensions

__all__ = [
    "FunctionalExtension",
    "ModelExtension",
    "SequentialExtension",
    "FunctionalLayerPipelineStageAssignment",
    "FunctionalNestedModelPipelineStageAssignment",
    "ModelLayerPipelineStageAssignment",
    "NestedModelPipelineStageAssignment",
    "PipelineStage",
    "ReplicatedMetricReductionMethod",
    "SequentialLayerPipelineStageAssignment",
    "SequentialNestedModelPipelineStageAssignment",
]
