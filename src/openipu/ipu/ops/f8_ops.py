"""`tensorflow.python.ipu.ops.f8_ops` (also `tensorflow.python.ipu.f8_ops`)."""

from openipu._src.ops.f8_ops import (
    Format,
    QuarterTensor,
    convert_from_f8,
    convert_to_f8,
    create_metadata,
    f8_conv_1d,
    f8_conv_2d,
    f8_conv_3d,
    f8_matmul,
)

__all__ = [
    "Format",
    "QuarterTensor",
    "convert_from_f8",
    "convert_to_f8",
    "create_metadata",
    "f8_conv_1d",
    "f8_conv_2d",
    "f8_conv_3d",
    "f8_matmul",
]
