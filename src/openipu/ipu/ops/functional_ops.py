"""`tensorflow.python.ipu.ops.functional_ops` (also `tensorflow.python.ipu.functional_ops`)."""

from openipu._src.ops.functional_ops import (
    outlined_function,
)

__all__ = [
    "outlined_function",
]
