"""`tensorflow.python.ipu.optimizers.sharded_optimizer`."""

from openipu._src.optimizers.sharded_optimizer import ShardedOptimizer

__all__ = ["ShardedOptimizer"]
