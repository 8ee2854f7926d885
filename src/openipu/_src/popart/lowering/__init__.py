"""ONNX -> TensorFlow lowering: the numerical core under PopART sessions.

``lower_model(model)`` returns a ``LoweredGraph`` whose ``run(inputs, weights, training, seed,
fetch)`` evaluates the model with TensorFlow ops. Op lowerings live in ``ops/``, one op family
per module, registered by (domain, op type, since_version) in ``registry``.
"""

from openipu._src.popart.lowering.model import LoweredGraph, TensorSpec, lower_model
from openipu._src.popart.lowering.op import Op, RunContext
from openipu._src.popart.lowering.registry import find_op, register_op, registered_ops

__all__ = [
    "LoweredGraph",
    "Op",
    "RunContext",
    "TensorSpec",
    "find_op",
    "lower_model",
    "register_op",
    "registered_ops",
]
