"""`tensorflow.python.ipu.ops.internal_ops` (also `tensorflow.python.ipu.internal_ops`)."""

from openipu._src.ops.internal_ops import (
    print_tensor,
    remap,
    remap_deduce,
)

__all__ = [
    "print_tensor",
    "remap",
    "remap_deduce",
]
