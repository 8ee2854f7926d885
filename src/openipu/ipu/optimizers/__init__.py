"""`tensorflow.python.ipu.optimizers`: IPU optimizer wrappers and gradient accumulation."""

from openipu._src.engine.gradient_accumulation import GradientAccumulationReductionMethod
from openipu._src.optimizers.cross_replica_optimizer import CrossReplicaOptimizer
from openipu._src.optimizers.gradient_accumulation_optimizer import (
    CrossReplicaGradientAccumulationOptimizer,
    CrossReplicaGradientAccumulationOptimizerV2,
    GradientAccumulationOptimizer,
    GradientAccumulationOptimizerV2,
)
from openipu._src.optimizers.ipu_optimizer import IpuOptimizer
from openipu._src.optimizers.map_gradient_optimizer import MapGradientOptimizer
from openipu._src.optimizers.sharded_optimizer import ShardedOptimizer

__all__ = [
    "CrossReplicaGradientAccumulationOptimizer",
    "CrossReplicaGradientAccumulationOptimizerV2",
    "CrossReplicaOptimizer",
    "GradientAccumulationOptimizer",
    "GradientAccumulationOptimizerV2",
    "GradientAccumulationReductionMethod",
    "IpuOptimizer",
    "MapGradientOptimizer",
    "ShardedOptimizer",
]
