"""`tensorflow.python.ipu.ops.control_flow_ops` (also `tensorflow.python.ipu.control_flow_ops`)."""

from openipu._src.ops.control_flow_ops import (
    barrier,
)

__all__ = [
    "barrier",
]
