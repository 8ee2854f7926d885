"""Gradient utility operators (`ipu.ops.grad_util_ops`)."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.eager.captured_gradients import STACK

_OUTSIDE_A_CONTEXT = (
    "tensorflow.python.ipu.ops.grad_util_ops.capture_upstream_gradients "
    "may only be used within the context of "
    "tensorflow.python.ipu.eager.GradientCaptureTape or "
    "GradientCaptureContext."
)


def capture_upstream_gradients(args, tag=""):
    """`args` unchanged; their incoming gradients are captured under `tag` by the enclosing
    `GradientCaptureContext` or `GradientCaptureTape` when gradients are computed.

    Raises RuntimeError when its gradient is taken outside such a context
    (tensorflow/python/ipu/ops/grad_util_ops_grad.py).
    """
    flat = [tf.convert_to_tensor(a) for a in nest.flatten(args)]

    @tf.custom_gradient
    def identity(*values):
        def gradient(*upstream):
            if STACK.count == 0:
                raise RuntimeError(_OUTSIDE_A_CONTEXT)
            STACK.push_gradients(tag, list(upstream))
            return list(upstream)

        return [tf.identity(v) for v in values], gradient

    return nest.pack_sequence_as(args, identity(*flat))
