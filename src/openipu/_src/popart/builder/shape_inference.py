"""Types and shapes for every tensor of a built model, where they can be known.

ONNX shape inference types the standard operators (and their subgraphs); the
ai.graphcore rules type the PopART operators. They feed each other, so the
two run in turn until no new tensor gets a type.
"""

from __future__ import annotations

import onnx
from onnx import GraphProto, ModelProto, TypeProto, ValueInfoProto, helper

from openipu._src.popart.builder.graphcore_shape_rules import TensorType, infer_graphcore_node
from openipu._src.popart.builder.model_context import AI_GRAPHCORE
from openipu._src.popart.errors import popart_exception


def tensor_type_of(type_proto: TypeProto) -> TensorType | None:
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.elem_type:
        return None
    tensor_type = type_proto.tensor_type
    if not tensor_type.HasField("shape"):
        return TensorType(tensor_type.elem_type, None)
    dims = tuple(
        dim.dim_value if dim.HasField("dim_value") else None for dim in tensor_type.shape.dim
    )
    return TensorType(tensor_type.elem_type, dims)


def known_types(graph: GraphProto) -> dict[str, TensorType]:
    types: dict[str, TensorType] = {}
    for tensor in graph.initializer:
        types[tensor.name] = TensorType(tensor.data_type, tuple(tensor.dims))
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor_type = tensor_type_of(value.type)
        known = types.get(value.name)
        # The same tensor can be listed twice; keep the entry that knows the shape.
        if tensor_type is not None and (known is None or known.shape is None):
            types[value.name] = tensor_type
    return types


def value_info(name: str, tensor_type: TensorType) -> ValueInfoProto:
    return helper.make_tensor_value_info(
        name, tensor_type.elem_type, None if tensor_type.shape is None else list(tensor_type.shape)
    )


def _drop_empty_types(graph: GraphProto) -> None:
    """Remove the empty `type {}` ONNX inference leaves on tensors it could not type.

    Left in place, an empty type stops a later inference run from typing the
    tensor, and the checker rejects it.
    """
    for output in graph.output:
        if output.HasField("type") and output.type.WhichOneof("value") is None:
            output.ClearField("type")
    untyped = [v for v in graph.value_info if v.type.WhichOneof("value") is None]
    for value in untyped:
        graph.value_info.remove(value)


def _run_onnx_inference(model: ModelProto) -> ModelProto:
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as error:
        raise popart_exception(f"the model is inconsistent: {error}") from None
    _drop_empty_types(inferred.graph)
    return inferred


def _callee_output_types(node) -> list[TensorType | None]:
    callee = next((a.g for a in node.attribute if a.name == "callee"), None)
    if callee is None:
        return []
    return [tensor_type_of(output.type) for output in callee.output]


def _type_graphcore_outputs(graph: GraphProto) -> bool:
    """Add value_info for ai.graphcore outputs that can now be typed; True if any was added."""
    types = known_types(graph)
    added = False
    for node in graph.node:
        if node.domain != AI_GRAPHCORE or all(output in types for output in node.output if output):
            continue
        if node.op_type == "Call":
            output_types = _callee_output_types(node)
        else:
            output_types = infer_graphcore_node(node, [types.get(name) for name in node.input])
        for output, tensor_type in zip(node.output, output_types or [], strict=False):
            if output and tensor_type is not None and output not in types:
                graph.value_info.append(value_info(output, tensor_type))
                types[output] = tensor_type
                added = True
    return added


def _refine_loop_outputs(graph: GraphProto) -> bool:
    """Give Loop outputs the shapes of the body's outputs; True if any shape was added.

    ONNX drops the shapes of loop-carried values, since a body may change
    them; a body whose outputs have static shapes keeps them, which is what
    lets a Loop output be a typed graph output.
    """
    refined = False
    types = known_types(graph)
    for node in graph.node:
        if node.op_type != "Loop" or node.domain not in ("", "ai.onnx"):
            continue
        body = next(a.g for a in node.attribute if a.name == "body")
        carried = len(node.input) - 2
        for index, output in enumerate(node.output):
            known = types.get(output)
            body_type = tensor_type_of(body.output[index + 1].type)
            if not output or body_type is None or body_type.shape is None:
                continue
            if known is not None and known.shape is not None:
                continue
            shape = body_type.shape if index < carried else (None, *body_type.shape)
            _set_value_info(graph, value_info(output, TensorType(body_type.elem_type, shape)))
            refined = True
    return refined


def _set_value_info(graph: GraphProto, info: ValueInfoProto) -> None:
    for existing in graph.value_info:
        if existing.name == info.name:
            existing.CopyFrom(info)
            return
    graph.value_info.append(info)


def _type_graph_outputs(graph: GraphProto) -> None:
    types = known_types(graph)
    for output in graph.output:
        known = tensor_type_of(output.type)
        if output.name in types and (known is None or known.shape is None):
            output.type.CopyFrom(value_info(output.name, types[output.name]).type)


def infer_types(model: ModelProto) -> ModelProto:
    """A copy of `model` with value_info for every tensor that can be typed, and typed outputs."""
    extra_rounds = sum(
        node.domain == AI_GRAPHCORE or node.op_type == "Loop" for node in model.graph.node
    )
    inferred = _run_onnx_inference(model)
    # Each round types at least one more node's outputs, or stops.
    for _ in range(extra_rounds):
        added = _type_graphcore_outputs(inferred.graph)
        refined = _refine_loop_outputs(inferred.graph)
        if not (added or refined):
            break
        inferred = _run_onnx_inference(inferred)
    _type_graph_outputs(inferred.graph)
    return inferred
