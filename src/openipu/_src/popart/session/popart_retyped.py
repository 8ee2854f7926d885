"""Tensors whose type in PopART's IR differs from the type the Builder gives them.

PopART's ArgMax and ArgMin give INT32 indices where ONNX says int64
(willow/src/op/argextrema.cpp); Subsample's IR shape rounds up where the Builder's shape
inference rounds down (willow/src/op/subsample.cpp against willow/src/defs.cpp); Scan's
scan outputs are concatenated along their axis where ONNX stacks them (willow/src/op/scan.cpp).
Everything computed from them follows the lowering. A session takes the types of these
tensors from the lowered graph, not from the model.
"""

from __future__ import annotations

import onnx

_INT32_INDEX_OPS = frozenset({"ArgMax", "ArgMin"})
_IR_SHAPED_GRAPHCORE_OPS = frozenset({"Subsample"})
_IR_SHAPED_ONNX_OPS = frozenset({"Scan"})


def retyped_tensors(graph: onnx.GraphProto) -> set[str]:
    """The outputs of ArgMax/ArgMin, Subsample and Scan and every tensor computed from them."""
    retyped: set[str] = set()
    for node in graph.node:  # nodes are in topological order
        onnx_op = node.domain in ("", "ai.onnx")
        starts_here = (onnx_op and node.op_type in _INT32_INDEX_OPS | _IR_SHAPED_ONNX_OPS) or (
            node.domain == "ai.graphcore" and node.op_type in _IR_SHAPED_GRAPHCORE_OPS
        )
        if starts_here or retyped.intersection(node.input):
            retyped.update(output for output in node.output if output)
    return retyped
