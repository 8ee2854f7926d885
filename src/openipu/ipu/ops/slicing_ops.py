"""`tensorflow.python.ipu.ops.slicing_ops` (also `tensorflow.python.ipu.slicing_ops`)."""

from openipu._src.ops.slicing_ops import (
    sequence_slice,
    sequence_slice_pack,
    sequence_slice_unpack,
)

__all__ = [
    "sequence_slice",
    "sequence_slice_pack",
    "sequence_slice_unpack",
]
