"""Reductions given an explicit empty `axes`, which reduce over no axis in PopART.

ONNX (before opset 18) reads an empty `axes` as "all axes", PopART as "none"
(willow/src/op/reduce.cpp: only absent axes mean all). ONNX's shape inference and
checker see such a node as an Identity, which has its shape and type.
"""

from __future__ import annotations

from onnx import AttributeProto, ModelProto, NodeProto, helper

_AXES_AS_INPUT_SINCE = 18


def _reduces_nothing(node: NodeProto, opset: int) -> bool:
    if node.domain not in ("", "ai.onnx") or not node.op_type.startswith("Reduce"):
        return False
    if opset >= _AXES_AS_INPUT_SINCE and node.op_type != "ReduceSum":
        return False
    return any(
        a.name == "axes" and a.type == AttributeProto.INTS and not a.ints for a in node.attribute
    )


def as_onnx_sees_it(model: ModelProto) -> tuple[ModelProto, dict[int, NodeProto]]:
    """`model` (a copy if changed) with those reductions of its main graph as Identity,
    and the replaced nodes by position, for `restore`."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    replaced = {i: n for i, n in enumerate(model.graph.node) if _reduces_nothing(n, opset)}
    if not replaced:
        return model, replaced
    copy = ModelProto()
    copy.CopyFrom(model)
    for index, node in replaced.items():
        copy.graph.node[index].CopyFrom(
            helper.make_node("Identity", [node.input[0]], list(node.output), name=node.name)
        )
    return copy, replaced


def restore(model: ModelProto, replaced: dict[int, NodeProto]) -> ModelProto:
    for index, node in replaced.items():
        model.graph.node[index].CopyFrom(node)
    return model
