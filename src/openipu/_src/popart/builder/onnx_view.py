"""What ONNX's shape inference and checker see of nodes PopART reads more freely.

- Reductions given an explicit empty `axes`: ONNX (before opset 18) reads it as "all
  axes", PopART as "none" (willow/src/op/reduce.cpp: only absent axes mean all). ONNX
  sees an Identity, which has the node's shape and type.
- Mul of float16 by a one-element float32: float16 in PopART (willow/src/op/mul.cpp,
  getOutputDataType); ONNX sees an Identity of the float16 operand, which has the
  result's type and (the float32 one being of no higher rank) shape.
- Squeeze with unsorted axes before opset 13: onnx infers a wrong shape; it sees
  them sorted.
- Flatten with a negative axis before opset 11: PopART counts it from the end
  (willow/src/op/flatten.cpp; operators_test/flatten_test.py); ONNX sees it normalized.
- Concat with a negative axis before opset 11: PopART counts it from the end
  (willow/src/op/concat.cpp; operators_test/operators_test_2.py); ONNX sees it normalized.
- Expand to, ConstantOfShape of, or Resize to the shape of an int32 Constant: PopART reads
  int32 or int64 shapes (willow/src/op/expand.cpp, resize.cpp; operators_test/expand_test.py,
  operators_test_2.py and resize_test_1.py); ONNX sees an int64 Constant.
- ConvTranspose given the whole output shape (batch and channels too) as output_shape:
  PopART takes it for the output's shape and pads the input by `pads`, as if no
  output_shape were given (willow/src/op/convtranspose.cpp; operators_test/operators_test_2.py);
  ONNX sees the node without it.
- Resize (willow/src/op/resize.cpp; operators_test/resize_test_1.py): PopART reads
  nearest_mode and coordinate_transformation_mode on Resize-10 too (ONNX sees the node
  without them), float16 scales (ONNX sees a float32 Constant), works out the output sizes in
  float32 (ONNX sees scales that give the same sizes in its double arithmetic), and a
  Resize-11 of sizes with
  no scales (""): ONNX sees the empty roi in the place of the scales, an empty float tensor
  as it requires there.
- A Constant with the builder's annotations (`__ipu_number`, `__pipeline_stage`, ...): ONNX
  infers nothing of a Constant with more than its one value attribute (a shape it gives a
  Reshape would be lost); it sees the Constant without them.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import AttributeProto, ModelProto, NodeProto, TensorProto, helper, numpy_helper

from openipu._src.popart.builder.shape_types import known_types
from openipu._src.popart.graphcore_ops.shape_rules import TensorType

_AXES_AS_INPUT_SINCE = 18


def _reduces_nothing(node: NodeProto, opset: int) -> bool:
    if node.domain not in ("", "ai.onnx") or not node.op_type.startswith("Reduce"):
        return False
    if opset >= _AXES_AS_INPUT_SINCE and node.op_type != "ReduceSum":
        return False
    return any(
        a.name == "axes" and a.type == AttributeProto.INTS and not a.ints for a in node.attribute
    )


def _negative_axis_before_opset_11(node: NodeProto, opset: int) -> int | None:
    """The negative axis of a Flatten or Concat from before ONNX took negative axes."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in ("Flatten", "Concat"):
        return None
    if opset >= 11:
        return None
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    return axis if axis < 0 else None


def _fp16_operand_of_mixed_mul(node: NodeProto, types: dict[str, TensorType]) -> str | None:
    if node.domain not in ("", "ai.onnx") or node.op_type != "Mul" or len(node.input) != 2:
        return None
    found: list[tuple[str, TensorType, tuple[int, ...]]] = []
    for name in node.input:
        known = types.get(name)
        if known is None or known.shape is None or None in known.shape:
            return None
        found.append((name, known, tuple(int(d or 0) for d in known.shape)))
    half = [(name, shape) for name, t, shape in found if t.elem_type == TensorProto.FLOAT16]
    single = [
        shape for _, t, shape in found if t.elem_type == TensorProto.FLOAT and math.prod(shape) == 1
    ]
    if len(half) != 1 or len(single) != 1 or len(single[0]) > len(half[0][1]):
        return None
    return half[0][0]


def _whole_output_shape(node: NodeProto, ranks: dict[str, int]) -> list[int] | None:
    """A ConvTranspose's output_shape if it names every dim of the output."""
    if node.op_type != "ConvTranspose" or node.domain not in ("", "ai.onnx"):
        return None
    shape = next((list(a.ints) for a in node.attribute if a.name == "output_shape"), None)
    if shape is None or node.input[0] not in ranks or len(shape) != ranks[node.input[0]]:
        return None
    return shape


def _seen(node: NodeProto, opset: int, types: dict[str, TensorType]) -> NodeProto | None:
    """The node ONNX should see instead of `node`, or None to keep it."""
    if node.op_type == "Constant" and any(a.name.startswith("__") for a in node.attribute):
        # PopART's annotations (virtual graph, pipeline stage...) on a Constant make ONNX
        # take it for no constant (it allows one attribute), losing the values a Reshape's
        # shape comes from.
        seen = NodeProto()
        seen.CopyFrom(node)
        del seen.attribute[:]
        seen.attribute.extend(a for a in node.attribute if not a.name.startswith("__"))
        return seen
    ranks = {name: len(t.shape) for name, t in types.items() if t.shape is not None}
    half = _fp16_operand_of_mixed_mul(node, types)
    if half is not None:
        return helper.make_node("Identity", [half], list(node.output), name=node.name)
    if node.op_type == "Squeeze" and node.domain in ("", "ai.onnx") and opset < 13:
        seen = NodeProto()
        seen.CopyFrom(node)
        for attribute in seen.attribute:
            if attribute.name == "axes" and node.input[0] in ranks:
                rank = ranks[node.input[0]]
                attribute.ints[:] = sorted(a % rank if a < 0 else a for a in attribute.ints)
        return seen if seen != node else None
    if _reduces_nothing(node, opset):
        return helper.make_node("Identity", [node.input[0]], list(node.output), name=node.name)
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        kept = [a for a in node.attribute if not a.name.startswith("__")]
        if len(kept) < len(node.attribute):
            seen = NodeProto()
            seen.CopyFrom(node)
            del seen.attribute[:]
            seen.attribute.extend(kept)
            return seen
    resize = _resize_seen(node, opset, types)
    if resize is not None:
        return resize
    whole = _whole_output_shape(node, ranks)
    if whole is not None:
        seen = NodeProto()
        seen.CopyFrom(node)
        del seen.attribute[:]
        seen.attribute.extend(a for a in node.attribute if a.name != "output_shape")
        return seen
    axis = _negative_axis_before_opset_11(node, opset)
    if axis is not None and node.input[0] in ranks:
        seen = NodeProto()
        seen.CopyFrom(node)
        for attribute in seen.attribute:
            if attribute.name == "axis":
                attribute.i = axis + ranks[node.input[0]]
        return seen
    return None


def _resize_seen(node: NodeProto, opset: int, types: dict[str, TensorType]) -> NodeProto | None:
    if node.op_type != "Resize" or node.domain not in ("", "ai.onnx"):
        return None
    seen = NodeProto()
    seen.CopyFrom(node)
    if opset < 11:
        del seen.attribute[:]
        seen.attribute.extend(
            a
            for a in node.attribute
            if a.name not in ("nearest_mode", "coordinate_transformation_mode")
        )
    elif opset < 13 and len(node.input) > 3 and node.input[2] == "":
        roi = types.get(node.input[1])
        if roi is not None and roi.shape is not None and tuple(roi.shape) == (0,):
            seen.input[2] = node.input[1]
    return seen if seen != node else None


def _resize_inputs_by_scales(model: ModelProto, opset: int) -> dict[str, list[str]]:
    """The data inputs of the Resize nodes (up to opset 11) each scales tensor feeds."""
    scales_index = 1 if opset < 11 else 2
    found: dict[str, list[str]] = {}
    if opset > 11:
        return found
    for node in model.graph.node:
        if node.op_type == "Resize" and len(node.input) > scales_index:
            found.setdefault(node.input[scales_index], []).append(node.input[0])
    return found


def _resize_scales_seen(
    node: NodeProto, resized: dict[str, list[str]], types: dict[str, TensorType]
) -> NodeProto | None:
    """The scales Constant of PopART's Resize as ONNX should see it: float32 (PopART also
    takes float16), each value nudged up where ONNX's floor(size * scale), in double, would
    miss PopART's float32 one (10 * 0.7f is 7 in float32, 6.99... in double)."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
        return None
    if not node.output or node.output[0] not in resized:
        return None
    value = next((a.t for a in node.attribute if a.name == "value"), None)
    if value is None or value.data_type not in (TensorProto.FLOAT16, TensorProto.FLOAT):
        return None
    scales = numpy_helper.to_array(value).astype("float32").reshape(-1)
    original = scales.copy()
    for data in resized[node.output[0]]:
        known = types.get(data)
        if known is None or known.shape is None or len(known.shape) != scales.size:
            continue
        for axis, size in enumerate(known.shape):
            if size is None:
                continue
            wanted = math.floor(float(np.float32(size) * original[axis]))
            while math.floor(float(size) * float(scales[axis])) < wanted:
                scales[axis] = np.nextafter(scales[axis], np.float32(np.inf))
    if value.data_type == TensorProto.FLOAT and np.array_equal(scales, original):
        return None
    seen = numpy_helper.from_array(scales.reshape(tuple(value.dims)), value.name)
    return helper.make_node("Constant", [], list(node.output), name=node.name, value=seen)


def _int32_expand_shape(node: NodeProto, expand_shapes: set[str]) -> NodeProto | None:
    """An int64 copy of an int32 Constant that gives an Expand or ConstantOfShape its shape."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
        return None
    if not node.output or node.output[0] not in expand_shapes:
        return None
    value = next((a.t for a in node.attribute if a.name == "value"), None)
    if value is None or value.data_type != TensorProto.INT32:
        return None
    as_int64 = numpy_helper.from_array(numpy_helper.to_array(value).astype("int64"), value.name)
    return helper.make_node("Constant", [], list(node.output), name=node.name, value=as_int64)


def as_onnx_sees_it(model: ModelProto) -> tuple[ModelProto, dict[int, NodeProto]]:
    """`model` (a copy if changed) with those nodes of its main graph as ONNX should see
    them, and the replaced nodes by position, for `restore`."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    types = known_types(model.graph)
    expand_shapes = {
        n.input[1] for n in model.graph.node if n.op_type == "Expand" and len(n.input) > 1
    } | {n.input[0] for n in model.graph.node if n.op_type == "ConstantOfShape" and n.input}
    expand_shapes |= {
        n.input[3] for n in model.graph.node if n.op_type == "Resize" and len(n.input) > 3
    }
    resized = _resize_inputs_by_scales(model, opset)
    seen = {
        i: _int32_expand_shape(n, expand_shapes)
        or _resize_scales_seen(n, resized, types)
        or _seen(n, opset, types)
        for i, n in enumerate(model.graph.node)
    }
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
