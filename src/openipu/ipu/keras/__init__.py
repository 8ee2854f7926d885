"""`tensorflow.python.ipu.keras`: Keras on the IPU (re-exports only)."""

from openipu._src.keras.api_v1.models import Model, Sequential
from openipu._src.keras.api_v1.pipeline_models import PipelineModel, PipelineSequential
from openipu._src.keras.extensions.pipeline_stages import (
    FirstApiPipelineStage as PipelineStage,
)
from openipu.ipu.keras import layers

__all__ = [
    "Model",
    "PipelineModel",
    "PipelineSequential",
    "PipelineStage",
    "Sequential",
    "layers",
]
