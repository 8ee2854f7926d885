"""`tensorflow.python.ipu.ops.rand_ops` (also `tensorflow.python.ipu.rand_ops`)."""

from openipu._src.ops.rand_ops import (
    dropout,
)

__all__ = [
    "dropout",
]
