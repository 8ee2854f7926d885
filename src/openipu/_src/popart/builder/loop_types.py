"""Types of Loop bodies and Loop outputs, as PopART's LoopOp gives them.

ONNX shape inference drops the shapes of loop-carried values, since an ONNX body may
change them from one iteration to the next. PopART's IR does not allow that: its LoopOp
(willow/src/op/loop.cpp, `LoopOp::setup`) gives the body's inputs the types of the Loop's
inputs and the Loop's outputs the types of the body's outputs. Doing the same here types
the body of a subgraph built with `addUntypedInputTensor`, and the Loop's outputs after it.
"""

from __future__ import annotations

from collections.abc import Mapping

from onnx import GraphProto, NodeProto, TensorProto, ValueInfoProto, numpy_helper

from openipu._src.popart.builder.graphcore_shape_rules import TensorType
from openipu._src.popart.builder.shape_types import (
    known_types,
    knows_more,
    set_value_info,
    tensor_type_of,
    value_info,
)

# The body's first two inputs: the iteration number and the condition.
_BODY_COUNTERS = (TensorType(TensorProto.INT64, ()), TensorType(TensorProto.BOOL, ()))


def _loops(graph: GraphProto) -> list[NodeProto]:
    return [n for n in graph.node if n.op_type == "Loop" and n.domain in ("", "ai.onnx")]


def _body(node: NodeProto) -> GraphProto:
    return next(attribute.g for attribute in node.attribute if attribute.name == "body")


def _has_shape(value: ValueInfoProto) -> bool:
    known = tensor_type_of(value.type)
    return known is not None and known.shape is not None


def type_loop_body_inputs(graph: GraphProto, outer: Mapping[str, TensorType] = {}) -> bool:  # noqa: B006
    """Give untyped body inputs the Loop's input types, in Loops nested in Loop bodies too
    (whose inputs may come from the scopes around, of types `outer`); True if any was typed."""
    typed = False
    types = {**outer, **known_types(graph)}
    for node in _loops(graph):
        body = _body(node)
        given = [*_BODY_COUNTERS, *(types.get(name) for name in node.input[2:])]
        for body_input, loop_type in zip(body.input, given, strict=False):
            if _has_shape(body_input) or loop_type is None or loop_type.shape is None:
                continue
            body_input.type.CopyFrom(value_info(body_input.name, loop_type).type)
            typed = True
        typed = type_loop_body_inputs(body, types) or typed
    return typed


def _trip_count(graph: GraphProto, name: str) -> int | None:
    """The value of a Loop's trip count when it is a constant (an initializer or Constant)."""
    tensors = [tensor for tensor in graph.initializer if tensor.name == name]
    for node in graph.node:
        if node.op_type == "Constant" and name in node.output:
            tensors += [a.t for a in node.attribute if a.name == "value" and a.HasField("t")]
    values = [numpy_helper.to_array(tensor).reshape(-1) for tensor in tensors]
    return int(values[0][0]) if values and values[0].size == 1 else None


def type_loop_outputs(graph: GraphProto, outer: Mapping[str, TensorType] = {}) -> bool:  # noqa: B006
    """Give Loop outputs the shapes of the body's outputs; True if any shape was added.

    A scan output (after the carried values) gains a leading dim, the iteration count: the
    trip count when it is a constant, as PopART's LoopOp sizes it.
    """
    refined = False
    types = {**outer, **known_types(graph)}
    for node in _loops(graph):
        body = _body(node)
        # Loops nested in this body first: the body's outputs may come from them.
        refined = type_loop_outputs(body, types) or refined
        carried = len(node.input) - 2
        trips = _trip_count(graph, node.input[0]) if node.input[0] else None
        for index, output in enumerate(node.output):
            known = types.get(output)
            body_type = tensor_type_of(body.output[index + 1].type)
            if not output or body_type is None or body_type.shape is None:
                continue
            shape = body_type.shape if index < carried else (trips, *body_type.shape)
            loop_type = TensorType(body_type.elem_type, shape)
            carried_in = types.get(node.input[2 + index]) if index < carried else None
            if carried_in is not None and carried_in.shape is not None:
                # A carried value keeps the Loop input's shape: LoopOp types the body's
                # inputs from the Loop's, whatever the body declared (randomsetup_test's
                # body declares [100] for a [1000] carried tensor).
                loop_type = carried_in
            if knows_more(loop_type, known) or (
                known is not None and known.shape is not None and loop_type != known
            ):
                set_value_info(graph, value_info(output, loop_type))
                refined = True
    return refined
