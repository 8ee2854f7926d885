"""`tensorflow.python.ipu.ops.cross_replica_ops` (also `tensorflow.python.ipu.cross_replica_ops`)."""

from openipu._src.ops.cross_replica_ops import (
    assume_equal_across_replicas,
    cross_replica_mean,
    cross_replica_sum,
)

__all__ = [
    "assume_equal_across_replicas",
    "cross_replica_mean",
    "cross_replica_sum",
]
