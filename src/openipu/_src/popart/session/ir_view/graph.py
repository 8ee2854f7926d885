"""The records of an IR description: tensors, ops and graphs, and their JSON form.

The JSON is what the original's `Session._serializeIr(IrSerializationFormat.JSON)` prints
(willow/src/ir.cpp `Ir::serialise`, willow/src/opserialiser.cpp `OpJsonSerialiser`): one list
of ops per graph, each op with its type, name, inputs (name, shape, type, index), outputs
(name, index) and attributes, every value a string.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class IrTensor:
    name: str
    shape: tuple[int, ...] | None
    data_type: str  # PopART's name of the element type ("FLOAT"), "UNDEFINED" if unknown


@dataclass
class IrOp:
    type: str
    name: str
    inputs: dict[int, str]  # input index -> tensor id
    outputs: dict[int, str]
    attributes: dict[str, str] = field(default_factory=dict)
    excluded_patterns: frozenset[str] = frozenset()
    inplace_priorities: dict[str, float] | None = None  # the builder's preferences, if any
    is_grad: bool = False
    # Op::Settings::schedulePriority, printed by every op (willow/src/op.cpp, appendMore).
    schedule_priority: float = 0.0
    # For a grad op: the forward op it differentiates (its placement follows it).
    forward: IrOp | None = None
    # For an op of the weight update: the weight it updates (its debug info is a child of
    # the optimizer's, per weight: willow/src/sgd.cpp, createOp).
    updates: str | None = None
    # For a Call that outlining made: the ops it replaced, and their copies in the callee.
    replaced: list[IrOp] = field(default_factory=list)
    outlined: list[IrOp] = field(default_factory=list)


@dataclass
class IrGraph:
    name: str
    ops: list[IrOp]
    inputs: list[str]
    outputs: list[str]

    def producers(self) -> dict[str, IrOp]:
        return {tensor: op for op in self.ops for tensor in op.outputs.values()}

    def consumers(self, tensor: str) -> list[IrOp]:
        return [op for op in self.ops if tensor in op.inputs.values()]


def shape_text(shape: tuple[int, ...] | None) -> str:
    """How the original prints a shape: `[2 384 1024]`."""
    return "[" + " ".join(str(d) for d in (shape or ())) + "]"


def _float_text(value: float) -> str:
    """A float as C++ streams print it (`inf` for the largest double cast to float)."""
    return f"{value:g}"


def _op_json(op: IrOp, tensors: dict[str, IrTensor]) -> dict[str, object]:
    inputs = []
    for index, name in sorted(op.inputs.items()):
        tensor = tensors.get(name, IrTensor(name, None, "UNDEFINED"))
        inputs.append(
            {
                "name": name,
                "shape": shape_text(tensor.shape),
                "type": tensor.data_type,
                "index": str(index),
            }
        )
    outputs = [{"name": name, "index": str(index)} for index, name in sorted(op.outputs.items())]
    return {
        "type": op.type,
        "name": op.name,
        "inputs": inputs,
        "outputs": outputs,
        "attributes": {**op.attributes, "schedulePriority": _float_text(op.schedule_priority)},
    }


def to_json(graphs: list[IrGraph], tensors: dict[str, IrTensor]) -> str:
    return json.dumps({graph.name: [_op_json(op, tensors) for op in graph.ops] for graph in graphs})
