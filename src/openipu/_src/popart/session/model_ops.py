"""The ops of a model as the original's IR sees them, and their annotations."""

from __future__ import annotations

import onnx


def annotation(node: onnx.NodeProto, name: str) -> int | None:
    """An int annotation of a node (virtual graph, pipeline stage...), or None."""
    for attribute in node.attribute:
        if attribute.name == name:
            return int(onnx.helper.get_attribute_value(attribute))
    return None


def ir_ops(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The main graph's nodes that are ops of the original's IR: a Constant becomes a
    constant tensor when the IR is built (willow/src/graph.cpp), so it has no virtual graph or
    pipeline stage to check."""
    return [node for node in model.graph.node if node.op_type != "Constant"]


def op_name(node: onnx.NodeProto) -> str:
    """An op's name in messages, as the original's `Op::debugName` gives it: its type and
    its name or first output."""
    return f"{node.op_type}({node.name or key(node)})"


def key(node: onnx.NodeProto) -> str:
    """A node's first output, which names it."""
    return next((name for name in node.output if name), "")
