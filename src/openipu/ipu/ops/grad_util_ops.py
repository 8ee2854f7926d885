"""`tensorflow.python.ipu.ops.grad_util_ops` (also `tensorflow.python.ipu.grad_util_ops`)."""

from openipu._src.ops.grad_util_ops import capture_upstream_gradients

__all__ = ["capture_upstream_gradients"]
