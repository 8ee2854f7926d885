"""`tensorflow.python.ipu.ops.pipelining_ops` (also `tensorflow.python.ipu.pipelining_ops`)."""

# Private in the original too; its tests map a stage to all the IPUs with it.
from openipu._src.pipelining.parallel_stages import ALL_DEVICES as _ALL_DEVICES  # noqa: F401
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
