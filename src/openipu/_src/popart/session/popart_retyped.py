"""Tensors whose type in PopART's IR differs from the type the Builder gives them.

PopART's ArgMax and ArgMin give INT32 indices where ONNX says int64
(willow/src/op/argextrema.cpp); Subsample's IR shape rounds up where the Builder's shape
inference rounds down (willow/src/op/subsample.cpp against willow/src/defs.cpp).
Everything computed from them follows the lowering. A session takes the types of these
tensors from the lowered graph, not from the model.
"""

from __future__ import annotations

import onnx

_INT32_INDEX_OPS = frozenset({"ArgMax", "ArgMin"})
_IR_SHAPED_GRAPHCORE_OPS = frozenset({"Subsample"})


def retyped_tensors(graph: onnx.GraphProto) -> set[str]:
    """The outputs of ArgMax/ArgMin and Subsample and every tensor computed from them."""
    retyped: set[str] = set()
    for node in graph.node:  # nodes are in topological order
        starts_here = (node.op_type in _INT32_INDEX_OPS and node.domain in ("", "ai.onnx")) or (
            node.op_type in _IR_SHAPED_GRAPHCORE_OPS and node.domain == "ai.graphcore"
        )
        if starts_here or retyped.intersection(node.input):
            retyped.update(output for output in node.output if output)
    return retyped
