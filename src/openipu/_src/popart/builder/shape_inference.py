"""Types and shapes for every tensor of a built model, where they can be known.

ONNX shape inference types the standard operators (and their subgraphs); the
ai.graphcore rules type the PopART operators. They feed each other, so the
two run in turn until no new tensor gets a type.
"""

from __future__ import annotations

import onnx
from onnx import GraphProto, ModelProto, NodeProto, helper

from openipu._src.popart.builder.graph_walk import iter_graphs
from openipu._src.popart.builder.graphcore_shape_rules import TensorType, infer_graphcore_node
from openipu._src.popart.builder.loop_types import type_loop_body_inputs, type_loop_outputs
from openipu._src.popart.builder.model_context import AI_GRAPHCORE
from openipu._src.popart.builder.onnx_view import as_onnx_sees_it, restore
from openipu._src.popart.builder.shape_types import (
    known_types,
    knows_more,
    set_value_info,
    tensor_type_of,
    value_info,
)
from openipu._src.popart.builder.standard_op_gaps import type_standard_op_gaps
from openipu._src.popart.errors import popart_exception


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
    seen, replaced = as_onnx_sees_it(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(seen, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as error:
        raise popart_exception(f"the model is inconsistent: {error}") from None
    _drop_empty_types(inferred.graph)
    return restore(inferred, replaced)


def _callee_output_types(node: NodeProto) -> list[TensorType | None]:
    callee = next((a.g for a in node.attribute if a.name == "callee"), None)
    if callee is None:
        return []
    return [tensor_type_of(output.type) for output in callee.output]


def _type_callee_inputs(graph: GraphProto, opsets) -> bool:
    """Give a Call's untyped callee inputs the Call's input types and type the callee.

    PopART's CallOp (willow/src/op/call.cpp) types the callee from the call site, so a
    subgraph built with `addUntypedInputTensor` gets its types there; True if any was typed.
    """
    types = known_types(graph)
    typed = False
    for node in graph.node:
        if node.domain != AI_GRAPHCORE or node.op_type != "Call":
            continue
        callee = next((a.g for a in node.attribute if a.name == "callee"), None)
        if callee is None:
            continue
        pairs = [
            (callee_input, types.get(name))
            for callee_input, name in zip(callee.input, node.input, strict=False)
        ]
        untyped = [
            (callee_input, call_type)
            for callee_input, call_type in pairs
            if tensor_type_of(callee_input.type) is None and call_type is not None
        ]
        if untyped:
            for callee_input, call_type in untyped:
                callee_input.type.CopyFrom(value_info(callee_input.name, call_type).type)
            wrapper = helper.make_model(callee, opset_imports=list(opsets))
            callee.CopyFrom(infer_types(wrapper).graph)
            typed = True
        elif _type_from_outer_scope(callee, types, opsets):
            typed = True
    return typed


def _outer_names(graph: GraphProto) -> set[str]:
    """The tensors a graph (or a subgraph nested in it) reads from the scopes around it."""
    defined: set[str] = set()
    read: set[str] = set()
    for each in iter_graphs(graph):
        defined.update(value.name for value in each.input)
        defined.update(tensor.name for tensor in each.initializer)
        for node in each.node:
            defined.update(node.output)
            read.update(name for name in node.input if name)
    return read - defined


def _type_from_outer_scope(callee: GraphProto, types: dict, opsets) -> bool:
    """Type a callee whose outputs are not all known from the types of the outer-scope
    tensors it reads (a subgraph that uses the main graph's tensors, as PopART's IR
    types it where it is called: operators_test/subgraph_op_test.py, nested loops).
    True if a callee output got a type or shape it did not have."""
    before = [tensor_type_of(output.type) for output in callee.output]
    if all(known is not None and known.shape is not None for known in before):
        return False
    outer = sorted(name for name in _outer_names(callee) if name in types)
    if not outer:
        return False
    wrapper_graph = GraphProto()
    wrapper_graph.CopyFrom(callee)
    wrapper_graph.input.extend(value_info(name, types[name]) for name in outer)
    wrapper = helper.make_model(wrapper_graph, opset_imports=list(opsets))
    inferred = infer_types(wrapper).graph
    after = [tensor_type_of(output.type) for output in inferred.output]
    if not any(
        new is not None and knows_more(new, old) for new, old in zip(after, before, strict=True)
    ):
        return False
    del inferred.input[len(callee.input) :]
    callee.CopyFrom(inferred)
    return True


def _type_graphcore_outputs(graph: GraphProto) -> bool:
    """Add value_info for ai.graphcore outputs that can now be typed; True if any was added."""
    types = known_types(graph)
    added = False
    for node in graph.node:
        if node.domain != AI_GRAPHCORE or all(
            output in types and types[output].shape is not None for output in node.output if output
        ):
            continue
        output_types: list[TensorType | None] | None
        if node.op_type == "Call":
            output_types = _callee_output_types(node)
        else:
            output_types = infer_graphcore_node(node, [types.get(name) for name in node.input])
        for output, tensor_type in zip(node.output, output_types or [], strict=False):
            if output and tensor_type is not None and knows_more(tensor_type, types.get(output)):
                # A graph output may be declared with its element type only.
                set_value_info(graph, value_info(output, tensor_type))
                types[output] = tensor_type
                added = True
    return added


def _type_graph_outputs(graph: GraphProto) -> bool:
    """Give the graph's outputs the types its tensors are known to have; True if any
    output learnt something."""
    types = known_types(graph)
    typed = False
    for output in graph.output:
        known = tensor_type_of(output.type)
        if output.name in types and knows_more(types[output.name], known):
            output.type.CopyFrom(value_info(output.name, types[output.name]).type)
            typed = True
    return typed


def _type_subgraph_outputs(graph: GraphProto) -> bool:
    """Type the outputs of the subgraphs nested in `graph`: a body output that is one of
    its inputs (a Loop's passed-on condition or value) has that input's type, which ONNX
    inference does not write there; the Loop rules read the body's outputs."""
    typed = False
    for subgraph in list(iter_graphs(graph))[1:]:
        typed = _type_graph_outputs(subgraph) or typed
    return typed


def infer_types(model: ModelProto) -> ModelProto:
    """A copy of `model` with value_info for every tensor that can be typed, and typed outputs."""
    inferred = _run_onnx_inference(model)
    # Each round types at least one more node's outputs, or stops.
    for _ in range(len(model.graph.node)):
        passes = (
            lambda graph: _type_callee_inputs(graph, model.opset_import),
            _type_graphcore_outputs,
            type_standard_op_gaps,
            type_loop_body_inputs,
            _type_subgraph_outputs,
            type_loop_outputs,
        )
        if not [typed for typed in [each(inferred.graph) for each in passes] if typed]:
            break
        inferred = _run_onnx_inference(inferred)
    _type_graph_outputs(inferred.graph)
    return inferred
