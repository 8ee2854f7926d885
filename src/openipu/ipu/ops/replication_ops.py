"""`tensorflow.python.ipu.ops.replication_ops` (also `tensorflow.python.ipu.replication_ops`)."""

from openipu._src.ops.replication_ops import (
    replication_index,
)

__all__ = [
    "replication_index",
]
