"""`tensorflow.python.ipu.ops.all_to_all_op` (also `tensorflow.python.ipu.all_to_all_op`)."""

from openipu._src.ops.all_to_all_op import (
    all_gather,
    all_to_all,
)

__all__ = [
    "all_gather",
    "all_to_all",
]
