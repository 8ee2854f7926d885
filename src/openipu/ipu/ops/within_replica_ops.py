"""`tensorflow.python.ipu.ops.within_replica_ops` (also `tensorflow.python.ipu.within_replica_ops`)."""

from openipu._src.ops.within_replica_ops import (
    all_gather,
    all_reduce,
    reduce_scatter,
)

__all__ = [
    "all_gather",
    "all_reduce",
    "reduce_scatter",
]
