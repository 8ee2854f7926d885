"""`tensorflow.python.ipu.ops.custom_ops` (also `tensorflow.python.ipu.custom_ops`)."""

from openipu._src.ops.custom_ops import (
    codelet_expression_op,
    cpu_user_operation,
    precompiled_user_op,
)

__all__ = [
    "codelet_expression_op",
    "cpu_user_operation",
    "precompiled_user_op",
]
