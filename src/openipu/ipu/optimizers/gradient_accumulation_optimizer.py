"""`tensorflow.python.ipu.optimizers.gradient_accumulation_optimizer`."""

from openipu._src.optimizers.gradient_accumulation_optimizer import (
    CrossReplicaGradientAccumulationOptimizer,
    CrossReplicaGradientAccumulationOptimizerV2,
    GradientAccumulationOptimizer,
    GradientAccumulationOptimizerV2,
)
from openipu._src.optimizers.reduction_method import GradientAccumulationReductionMethod

__all__ = [
    "CrossReplicaGradientAccumulationOptimizer",
    "CrossReplicaGradientAccumulationOptimizerV2",
    "GradientAccumulationOptimizer",
    "GradientAccumulationOptimizerV2",
    "GradientAccumulationReductionMethod",
]
