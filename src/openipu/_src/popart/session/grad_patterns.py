"""Gradients the original's backend cannot lower without a pattern.

PopART's autodiff makes grad ops (CosGradOp, SubtractArg1GradOp, ...) that have no Poplar
lowering: a pattern replaces each with ops that have one. With the pattern disabled the
session fails when it lowers the grad op, naming the pattern
(tests/integration/operators_test/pattern_op_removal_test.py). openipu's autodiff needs no
pattern, so it refuses those graphs here to behave as the original.
"""

from __future__ import annotations

import onnx

from openipu._src.popart.errors import popart_exception
from openipu._src.popart.options.patterns import Patterns

# (op type, input index whose gradient is needed) -> the pattern that removes its grad op.
_GRAD_PATTERNS = {
    ("Cos", 0): "CosGradOp",
    ("Cosh", 0): "CoshOp",
    ("Reciprocal", 0): "ReciprocalGradOp",
    ("Sqrt", 0): "SqrtGradOp",
    ("Exp", 0): "ExpGradOp",
    ("Expm1", 0): "Expm1GradOp",
    ("Log1p", 0): "Log1pGradOp",
    ("Sub", 1): "SubtractArg1GradOp",
    ("Atan2", 0): "Atan2Arg0GradOp",
    ("Atan2", 1): "Atan2Arg1GradOp",
    ("ConvTranspose", 1): "ConvFlipWeightsGradOp",
}


def weight_dependent(graph: onnx.GraphProto, weight_ids: set[str]) -> set[str]:
    """The tensors computed from a trained weight (the weights included): PopART makes grad
    ops only on the way from the loss to the weights."""
    dependent = set(weight_ids)
    for node in graph.node:
        if any(name in dependent for name in node.input if name):
            dependent.update(name for name in node.output if name)
    return dependent


def check_grad_patterns(
    graph: onnx.GraphProto, needs_gradient: set[str], patterns: Patterns
) -> None:
    """Refuses a grad op whose removing pattern is disabled, in the original's words."""
    for node in graph.node:
        if not any(name in needs_gradient for name in node.output):
            continue
        for index, name in enumerate(node.input):
            pattern = _GRAD_PATTERNS.get((node.op_type, index))
            if pattern is None or name not in needs_gradient:
                continue
            if not patterns.isPatternEnabled(pattern):
                raise popart_exception(
                    f"Cannot lower the gradient of {node.op_type} '{node.name or node.output[0]}' "
                    f"(input {index}). This op should have been removed by pattern {pattern}"
                )
