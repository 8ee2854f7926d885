"""`tf.keras.ipu.optimizers`: Keras optimizer wrappers for the IPU (re-exports only)."""

from openipu._src.keras.optimizers.als_optimizer import ALSOptimizer
from openipu._src.keras.optimizers.als_specializations import (
    ALSOptimizerAdam,
    ALSOptimizerRMSProp,
    ALSOptimizerSGD,
)
from openipu._src.keras.optimizers.gradient_accumulation import (
    ALSGradientAccumulationOptimizer,
    GradientAccumulationOptimizer,
)

__all__ = [
    "ALSGradientAccumulationOptimizer",
    "ALSOptimizer",
    "ALSOptimizerAdam",
    "ALSOptimizerRMSProp",
    "ALSOptimizerSGD",
    "GradientAccumulationOptimizer",
]
