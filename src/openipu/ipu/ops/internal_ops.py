"""`tensorflow.python.ipu.ops.internal_ops` (also `tensorflow.python.ipu.internal_ops`)."""

from openipu._src.ops.internal_ops import (
    fifo,
    get_current_iteration_counter,
    print_tensor,
    remap,
    remap_deduce,
)

__all__ = [
    "fifo",
    "get_current_iteration_counter",
    "print_tensor",
    "remap",
    "remap_deduce",
]
