"""Reading and writing the types of a graph's tensors (inputs, initializers, value_info)."""

from __future__ import annotations

from onnx import GraphProto, TypeProto, ValueInfoProto, helper

from openipu._src.popart.graphcore_ops.shape_rules import TensorType


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
        # The same tensor can be listed twice; keep the entry that knows the shape best.
        if tensor_type is not None and knows_more(tensor_type, types.get(value.name)):
            types[value.name] = tensor_type
    return types


def value_info(name: str, tensor_type: TensorType) -> ValueInfoProto:
    return helper.make_tensor_value_info(
        name, tensor_type.elem_type, None if tensor_type.shape is None else list(tensor_type.shape)
    )


def set_value_info(graph: GraphProto, info: ValueInfoProto) -> None:
    """Add `info`, or replace the graph's value_info entry of the same tensor."""
    for existing in graph.value_info:
        if existing.name == info.name:
            existing.CopyFrom(info)
            return
    graph.value_info.append(info)


def knows_more(new: TensorType, known: TensorType | None) -> bool:
    """Whether `new` knows the shape, or a dim, that `known` does not."""
    if known is None or known.shape is None:
        return new.shape is not None or known is None
    if new.shape is None or len(new.shape) != len(known.shape):
        return False
    return any(
        old is None and dim is not None for old, dim in zip(known.shape, new.shape, strict=True)
    )
