"""`tensorflow.python.ipu.ops.normalization_ops` (also `tensorflow.python.ipu.normalization_ops`)."""

from openipu._src.ops.normalization_ops import (
    group_norm,
    instance_norm,
    layer_norm,
)

__all__ = [
    "group_norm",
    "instance_norm",
    "layer_norm",
]
