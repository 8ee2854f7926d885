"""The trace PopART's constant folding writes for the ops it has no ConstExpr version of.

The original folds constant-fed ops in each of the three pattern stages of Ir::prepare
(willow/src/ir.cpp, applyPreAliasPatterns) and, for every op of a type without a ConstExpr
implementation, traces that it returns early (willow/src/ces/constexpr.cpp, isComputable;
constexpr_tests/no_impl_test.py looks for it). The lowering computes constants as any other
value, so only the trace is kept.
"""

from __future__ import annotations

import onnx

from openipu._src.popart.builder.graph_walk import iter_graphs
from openipu._src.popart.logging import TRACE, python_logger

_logger = python_logger("ces")

# willow/src/ces/constexpr.cpp, ConstExprOpManager::registerConstOps.
_CONST_EXPR_OP_TYPES = frozenset(
    "Add Mul Sub Fmod Div Cast Scale Slice SliceInplace Transpose Concat ConcatInplace "
    "Unsqueeze Squeeze Identity Detach Reshape ReshapeInplace Gather Flatten FlattenInplace "
    "Floor ReduceProd".split()
)
# Ir::prepare's applyPreAliasPatterns stages, each of which folds constants.
_FOLDING_STAGES = 3


def trace_constant_folding(model: onnx.ModelProto) -> None:
    """Trace, as the original's folding passes do, each op it could not fold."""
    if not _logger.isEnabledFor(TRACE):
        return
    # Constants become constant tensors of the IR, not ops.
    op_types = [
        node.op_type
        for graph in iter_graphs(model.graph)
        for node in graph.node
        if node.op_type != "Constant"
    ]
    for _ in range(_FOLDING_STAGES):
        for op_type in op_types:
            if op_type not in _CONST_EXPR_OP_TYPES:
                _logger.log(
                    TRACE,
                    "No ConstExpr implementation of %s, returning from constant folding early.",
                    op_type,
                )
