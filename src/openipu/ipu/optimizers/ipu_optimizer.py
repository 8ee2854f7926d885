"""`tensorflow.python.ipu.optimizers.ipu_optimizer`."""

from openipu._src.optimizers.ipu_optimizer import IpuOptimizer

__all__ = ["IpuOptimizer"]
