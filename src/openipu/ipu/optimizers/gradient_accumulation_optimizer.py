"""`tensorflow.python.ipu.optimizers.gradient_accumulation_optimizer`."""

from openipu._src.engine.gradient_accumulation import GradientAccumulationReductionMethod
from openipu._src.optimizers.gradient_accumulation_optimizer import (
    CrossReplicaGradientAccumulationOptimizer,
    CrossReplicaGradientAccumulationOptimizerV2,
    GradientAccumulationOptimizer,
    GradientAccumulationOptimizerV2,
)

__all__ = [
    "CrossReplicaGradientAccumulationOptimizer",
    "CrossReplicaGradientAccumulationOptimizerV2",
    "GradientAccumulationOptimizer",
    "GradientAccumulationOptimizerV2",
    "GradientAccumulationReductionMethod",
]
