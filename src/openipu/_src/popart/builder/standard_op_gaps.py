"""Output types of standard ONNX operators that ONNX shape inference leaves untyped.

PopART's IR types every output (each Op's `setup`); ONNX's inference functions skip a
few, which would leave graph outputs without the type the ONNX checker requires.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from onnx import GraphProto, NodeProto

from openipu._src.popart.builder.shape_types import (
    known_types,
    knows_more,
    set_value_info,
    value_info,
)
from openipu._src.popart.graphcore_ops.shape_rules import TensorType

# (node, input types, the graph's known types, the node that makes each tensor) -> output
# types, None where not known
_GapRule = Callable[
    [NodeProto, Sequence[TensorType | None], Mapping[str, TensorType], Mapping[str, NodeProto]],
    Sequence[TensorType | None],
]


def _batch_normalization(node, inputs, types, producers):
    # BatchNormalization-9's training outputs (mean, var, saved_mean, saved_var) are all
    # per channel, like the running mean input (willow/src/op/batchnorm.cpp).
    return [inputs[0], *[inputs[3]] * 4]


def _recurrent(node, inputs, types, producers):
    # Without a hidden_size attribute ONNX leaves the hidden dim unknown; PopART's
    # GRU/LSTM/RNN ops take it from the recurrence weights R [directions, gates*hidden, hidden]
    # (willow/src/op/gru.cpp, lstm.cpp, rnn.cpp).
    data, recurrence = inputs[0], inputs[2]
    if data is None or recurrence is None or data.shape is None or recurrence.shape is None:
        return []
    sequence, batch = data.shape[0], data.shape[1]
    directions, hidden = recurrence.shape[0], recurrence.shape[2]
    state = TensorType(data.elem_type, (directions, batch, hidden))
    full = TensorType(data.elem_type, (sequence, directions, batch, hidden))
    return [full, state, state]


def _shape_values(
    name: str, types: Mapping[str, TensorType], producers: Mapping[str, NodeProto]
) -> list[int] | None:
    """The values of a tensor made by a Shape op of a tensor of known dims."""
    shape_op = producers.get(name)
    if shape_op is None or shape_op.op_type != "Shape" or shape_op.domain not in ("", "ai.onnx"):
        return None
    of = types.get(shape_op.input[0])
    if of is None or of.shape is None:
        return None
    bounds = {a.name: a.i for a in shape_op.attribute if a.name in ("start", "end")}
    dims = of.shape[bounds.get("start", 0) : bounds.get("end", len(of.shape))]
    return None if None in dims else [int(d) for d in dims if d is not None]


def _reshape_to_shape_of(node, inputs, types, producers):
    # ONNX does not propagate the values of Shape-1 to Reshape; PopART's IR folds the Shape
    # of any version and types the Reshape to it (willow/src/op/reshape.cpp;
    # operators_test.py, test_shape).
    data = inputs[0]
    if data is None or data.shape is None or None in data.shape or len(node.input) < 2:
        return []
    target = _shape_values(node.input[1], types, producers)
    if target is None:
        return []
    allow_zero = any(a.name == "allowzero" and a.i for a in node.attribute)
    dims = [data.shape[i] if d == 0 and not allow_zero else d for i, d in enumerate(target)]
    if dims.count(-1) == 1:
        known = math.prod(d for d in dims if d != -1)
        if known == 0:
            return []
        dims[dims.index(-1)] = math.prod(data.shape) // known
    if -1 in dims or math.prod(dims) != math.prod(data.shape):
        return []  # the IR reports the bad shape when it types the op
    return [TensorType(data.elem_type, tuple(dims))]


_GAP_RULES: dict[str, _GapRule] = {
    "BatchNormalization": _batch_normalization,
    "GRU": _recurrent,
    "LSTM": _recurrent,
    "RNN": _recurrent,
    "Reshape": _reshape_to_shape_of,
}


def type_standard_op_gaps(graph: GraphProto) -> bool:
    """Type (or complete) the outputs ONNX left untyped; True if any was typed."""
    types = known_types(graph)
    producers = {output: node for node in graph.node for output in node.output if output}
    added = False
    for node in graph.node:
        rule = _GAP_RULES.get(node.op_type)
        if rule is None or node.domain not in ("", "ai.onnx"):
            continue
        input_types = [types.get(name) for name in node.input]
        for output, tensor_type in zip(
            node.output, rule(node, input_types, types, producers), strict=False
        ):
            if output and tensor_type is not None and knows_more(tensor_type, types.get(output)):
                set_value_info(graph, value_info(output, tensor_type))
                types[output] = tensor_type
                added = True
    return added
