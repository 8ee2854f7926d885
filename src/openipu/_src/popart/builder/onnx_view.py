"""What ONNX's shape inference and checker see of nodes PopART reads more freely.

- Reductions given an explicit empty `axes`: ONNX (before opset 18) reads it as "all
  axes", PopART as "none" (willow/src/op/reduce.cpp: only absent axes mean all). ONNX
  sees an Identity, which has the node's shape and type.
- Flatten with a negative axis before opset 11: PopART counts it from the end
  (willow/src/op/flatten.cpp; operators_test/flatten_test.py); ONNX sees it normalized.
"""

from __future__ import annotations

from onnx import AttributeProto, ModelProto, NodeProto, helper

from openipu._src.popart.builder.shape_types import known_types

_AXES_AS_INPUT_SINCE = 18


def _reduces_nothing(node: NodeProto, opset: int) -> bool:
    if node.domain not in ("", "ai.onnx") or not node.op_type.startswith("Reduce"):
        return False
    if opset >= _AXES_AS_INPUT_SINCE and node.op_type != "ReduceSum":
        return False
    return any(
        a.name == "axes" and a.type == AttributeProto.INTS and not a.ints for a in node.attribute
    )


def _negative_flatten_axis(node: NodeProto, opset: int) -> int | None:
    if node.domain not in ("", "ai.onnx") or node.op_type != "Flatten" or opset >= 11:
        return None
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    return axis if axis < 0 else None


def _seen(node: NodeProto, opset: int, ranks: dict[str, int]) -> NodeProto | None:
    """The node ONNX should see instead of `node`, or None to keep it."""
    if _reduces_nothing(node, opset):
        return helper.make_node("Identity", [node.input[0]], list(node.output), name=node.name)
    axis = _negative_flatten_axis(node, opset)
    if axis is not None and node.input[0] in ranks:
        seen = NodeProto()
        seen.CopyFrom(node)
        for attribute in seen.attribute:
            if attribute.name == "axis":
                attribute.i = axis + ranks[node.input[0]]
        return seen
    return None


def as_onnx_sees_it(model: ModelProto) -> tuple[ModelProto, dict[int, NodeProto]]:
    """`model` (a copy if changed) with those nodes of its main graph as ONNX should see
    them, and the replaced nodes by position, for `restore`."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    ranks = {
        name: len(t.shape) for name, t in known_types(model.graph).items() if t.shape is not None
    }
    seen = {i: _seen(n, opset, ranks) for i, n in enumerate(model.graph.node)}
    replacements = {i: n for i, n in seen.items() if n is not None}
    if not replacements:
        return model, {}
    copy = ModelProto()
    copy.CopyFrom(model)
    for index, node in replacements.items():
        copy.graph.node[index].CopyFrom(node)
    return copy, {i: model.graph.node[i] for i in replacements}


def restore(model: ModelProto, replaced: dict[int, NodeProto]) -> ModelProto:
    for index, node in replaced.items():
        model.graph.node[index].CopyFrom(node)
    return model
