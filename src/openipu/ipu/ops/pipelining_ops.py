"""`tensorflow.python.ipu.ops.pipelining_ops` (also `tensorflow.python.ipu.pipelining_ops`)."""

from openipu._src.pipelining.pipelining_ops import (
    OptimizerFunctionOutput,
    PipelineSchedule,
    PipelineStageOptions,
    RecomputationMode,
    pipeline,
    recomputation_checkpoint,
    reduce,
)

__all__ = [
    "OptimizerFunctionOutput",
    "PipelineSchedule",
    "PipelineStageOptions",
    "RecomputationMode",
    "pipeline",
    "recomputation_checkpoint",
    "reduce",
]
