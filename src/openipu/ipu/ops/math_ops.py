"""`tensorflow.python.ipu.ops.math_ops` (also `tensorflow.python.ipu.math_ops`)."""

from openipu._src.ops.math_ops import (
    segment_sum,
    serialized_matmul,
)

__all__ = [
    "segment_sum",
    "serialized_matmul",
]
