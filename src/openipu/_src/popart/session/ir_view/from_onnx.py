"""The IR's ops as the original builds them from an ONNX model (willow/src/ir.cpp,
`constructForwards`): one op per node, typed by the node's op type; `Constant` nodes become
constant tensors rather than ops; inputs the original reads as constants when it builds an
op (a Reshape's shape, a Slice's starts) are not op inputs; and ops whose inputs are all
constant are folded away where the original has a constant-expression rule for them
(willow/src/ces/constexpr.cpp)."""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.builder.enums import RecomputeType
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor

# willow/src/ces/constexpr.cpp, ConstExprOpManager::registerConstOps.
_CONST_EXPR_TYPES = frozenset(
    "Add Mul Sub Fmod Div Cast Scale Slice Transpose Concat Unsqueeze Squeeze Identity Detach "
    "Reshape Gather Flatten Floor ReduceProd".split()
)

# Inputs (by index from this one on) that the original's op reads when it is built, from a
# constant tensor, instead of keeping them as op inputs.
_CONSTANT_INPUTS_FROM = {
    "Reshape": 1,
    "Slice": 1,
    "Squeeze": 1,
    "Unsqueeze": 1,
    "Pad": 1,
    "Split": 1,
    "Tile": 1,
    "Resize": 1,
    "Upsample": 1,
    "ReduceSum": 1,
    "ReduceMean": 1,
    "ReduceMax": 1,
    "ReduceMin": 1,
    "ReduceProd": 1,
    "ReduceL1": 1,
    "ReduceL2": 1,
    "ReduceLogSum": 1,
    "ReduceLogSumExp": 1,
    "ReduceSumSquare": 1,
    "ConstantOfShape": 0,
}

# Node attributes the original keeps as op settings, under the names it prints them with
# (willow/src/op.cpp, Op::appendAttributes).
_SETTING_ATTRIBUTES = {
    names.VIRTUAL_GRAPH: names.VIRTUAL_GRAPH,
    names.PIPELINE_STAGE: names.PIPELINE_STAGE,
    names.EXECUTION_PHASE: names.EXECUTION_PHASE,
}


@dataclass
class OnnxIr:
    graphs: list[IrGraph]
    tensors: dict[str, IrTensor]
    constants: set[str] = field(default_factory=set)
    variables: set[str] = field(default_factory=set)
    anchors: frozenset[str] = frozenset()  # never folded (willow/src/ces/constexpr.cpp)


def _value_text(attribute: onnx.AttributeProto) -> str | None:
    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
        return "[" + " ".join(str(v) for v in value) + "]"
    return None  # graphs and tensors are not printed as attributes


def _attributes(node: onnx.NodeProto) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for attribute in node.attribute:
        if attribute.name in ("callee", "body") and attribute.HasField("g"):
            # A Call, Loop or Scan prints the id of the graph it calls (willow/src/op/call.cpp).
            attributes["callee"] = attribute.g.name
            continue
        if attribute.name.startswith("__"):
            if attribute.name in _SETTING_ATTRIBUTES:
                attributes[_SETTING_ATTRIBUTES[attribute.name]] = str(
                    onnx.helper.get_attribute_value(attribute)
                )
            continue
        text = _value_text(attribute)
        if text is not None:
            attributes[attribute.name] = text
    recompute = _int_attribute(node, names.RECOMPUTE_OUTPUT)
    set_recompute(attributes, RecomputeType(recompute).name if recompute is not None else None)
    return attributes


def set_recompute(attributes: dict[str, str], recompute_type: str | None) -> None:
    """An op's recompute type, as the original prints it: `recompute` (YES for Recompute
    only) and `recomputetype` (willow/src/op.cpp, appendAttributes)."""
    recompute_type = recompute_type or "Undefined"
    attributes["recompute"] = "YES" if recompute_type == "Recompute" else "NO"
    attributes["recomputetype"] = recompute_type


def _int_attribute(node: onnx.NodeProto, name: str) -> int | None:
    for attribute in node.attribute:
        if attribute.name == name:
            value = onnx.helper.get_attribute_value(attribute)
            return value if isinstance(value, int) else None
    return None


def _strings(node: onnx.NodeProto, name: str) -> list[str]:
    for attribute in node.attribute:
        if attribute.name == name:
            return [s.decode() for s in attribute.strings]
    return []


def _inplace_priorities(node: onnx.NodeProto) -> dict[str, float] | None:
    variants = _strings(node, names.INPLACE_OP_NAMES)
    if not variants:
        return None
    priorities: list[float] = []
    for attribute in node.attribute:
        if attribute.name == names.INPLACE_OP_PRIORITIES:
            priorities = list(attribute.floats)
    return dict(zip(variants, priorities, strict=False))


def _op(node: onnx.NodeProto) -> IrOp:
    kept = len(node.input)
    if node.op_type in _CONSTANT_INPUTS_FROM:
        kept = min(kept, _CONSTANT_INPUTS_FROM[node.op_type])
    return IrOp(
        type=node.op_type,
        name=node.name,
        inputs={i: t for i, t in enumerate(node.input[:kept]) if t},
        outputs={i: t for i, t in enumerate(node.output) if t},
        attributes=_attributes(node),
        excluded_patterns=frozenset(_strings(node, names.EXCLUDE_PATTERNS)),
        inplace_priorities=_inplace_priorities(node),
    )


def build(
    model: onnx.ModelProto,
    tensors: dict[str, IrTensor],
    main_graph_name: str,
    weights_are_constant: bool,
    anchors: frozenset[str] = frozenset(),
) -> OnnxIr:
    ir = OnnxIr([], dict(tensors), anchors=anchors)
    initializers = {tensor.name for tensor in model.graph.initializer}
    (ir.constants if weights_are_constant else ir.variables).update(initializers)
    _add_graph(ir, model.graph, main_graph_name, set(initializers), is_main=True)
    return ir


def _add_graph(
    ir: OnnxIr, graph: onnx.GraphProto, name: str, initializers: set[str], is_main: bool
) -> None:
    if any(existing.name == name for existing in ir.graphs):
        return
    ops: list[IrOp] = []
    for value in graph.value_info:
        _declare(ir, value)
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            ir.constants.update(node.output)
            continue
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                _add_graph(ir, subgraph, subgraph.name, set(), is_main=False)
        op = _op(node)
        if (
            op.type in _CONST_EXPR_TYPES
            and all(t in ir.constants for t in op.inputs.values())
            and not ir.anchors.intersection(op.outputs.values())
        ):
            ir.constants.update(op.outputs.values())  # folded: a constant, no op
            continue
        ops.append(op)
    inputs = [value.name for value in graph.input if value.name not in initializers]
    outputs = [] if is_main else [value.name for value in graph.output]
    if not is_main:
        for value in list(graph.input) + list(graph.output):
            _declare(ir, value)
    ir.graphs.append(IrGraph(name, ops, inputs, outputs))


def _declare(ir: OnnxIr, value: onnx.ValueInfoProto) -> None:
    if value.name in ir.tensors or value.type.WhichOneof("value") != "tensor_type":
        return
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):
        return
    dims = tuple(d.dim_value for d in tensor_type.shape.dim)
    data_type = onnx.TensorProto.DataType.Name(tensor_type.elem_type)
    ir.tensors[value.name] = IrTensor(value.name, dims, data_type)
