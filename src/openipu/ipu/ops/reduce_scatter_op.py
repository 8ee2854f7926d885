"""`tensorflow.python.ipu.ops.reduce_scatter_op` (also `tensorflow.python.ipu.reduce_scatter_op`)."""

from openipu._src.ops.reduce_scatter_op import (
    reduce_scatter,
)

__all__ = [
    "reduce_scatter",
]
