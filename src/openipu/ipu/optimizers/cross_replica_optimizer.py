"""`tensorflow.python.ipu.optimizers.cross_replica_optimizer`."""

from openipu._src.optimizers.cross_replica_optimizer import CrossReplicaOptimizer

__all__ = ["CrossReplicaOptimizer"]
