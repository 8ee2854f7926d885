"""`tensorflow.python.ipu.optimizers.map_gradient_optimizer`."""

from openipu._src.optimizers.map_gradient_optimizer import MapGradientOptimizer

__all__ = ["MapGradientOptimizer"]
