"""`tensorflow.python.ipu.ops.image_ops` (also `tensorflow.python.ipu.image_ops`)."""

from openipu._src.ops.image_ops import (
    normalise_image,
)

__all__ = [
    "normalise_image",
]
