"""The ops of a model as the original's IR sees them, and their annotations."""

from __future__ import annotations

import onnx

from openipu._src.popart.builder.graph_walk import iter_graphs
from openipu._src.popart.lowering.ops.ai_graphcore import STRIDED_GROUPING


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
    """An op's short name in messages: its type and its name or first output."""
    return f"{node.op_type}({node.name or key(node)})"


def debug_name(
    node: onnx.NodeProto, model: onnx.ModelProto, inputs: list[str] | None = None
) -> str:
    """An op's name as the original's `Op::debugName` gives it (willow/src/op.cpp):
    `Op(<name> (<domain>.<type>:<version>), inputs=[...], outputs=[...])`, with `inputs` in
    place of the node's where the IR renamed them (copies between IPUs)."""
    domain = node.domain or "ai.onnx"
    opset = next((o.version for o in model.opset_import if (o.domain or "ai.onnx") == domain), 1)
    try:
        version = onnx.defs.get_schema(node.op_type, opset, node.domain).since_version
    except onnx.defs.SchemaError:
        version = 1
    opid = f"{domain}.{node.op_type}:{version}"
    identifier = f"{node.name} ({opid})" if node.name else opid
    ins = ", ".join(node.input if inputs is None else inputs)
    return f"Op({identifier}, inputs=[{ins}], outputs=[{', '.join(node.output)}])"


def key(node: onnx.NodeProto) -> str:
    """A node's first output, which names it."""
    return next((name for name in node.output if name), "")


def with_strided_group_norms(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose ai.graphcore GroupNormalization nodes group channels strided
    (channel c in group c % num_groups), as SessionOptions.groupNormStridedChannelGrouping
    asks of every one of them (willow/src/popx/op/groupnormx.cpp passes it to poplibs)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for graph in iter_graphs(copy.graph):
        for node in graph.node:
            if node.domain == "ai.graphcore" and node.op_type == "GroupNormalization":
                node.attribute.append(onnx.helper.make_attribute(STRIDED_GROUPING, 1))
    return copy
