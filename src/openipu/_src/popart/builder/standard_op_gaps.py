"""Output types of standard ONNX operators that ONNX shape inference leaves untyped.

PopART's IR types every output (each Op's `setup`); ONNX's inference functions skip a
few, which would leave graph outputs without the type the ONNX checker requires.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from onnx import GraphProto, NodeProto

from openipu._src.popart.builder.shape_types import (
    known_types,
    knows_more,
    set_value_info,
    value_info,
)
from openipu._src.popart.graphcore_ops.shape_rules import TensorType

# (node, input types) -> output types, None where not known
_GapRule = Callable[[NodeProto, Sequence[TensorType | None]], Sequence[TensorType | None]]


def _batch_normalization(node, inputs):
    # BatchNormalization-9's training outputs (mean, var, saved_mean, saved_var) are all
    # per channel, like the running mean input (willow/src/op/batchnorm.cpp).
    return [inputs[0], *[inputs[3]] * 4]


def _recurrent(node, inputs):
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


_GAP_RULES: dict[str, _GapRule] = {
    "BatchNormalization": _batch_normalization,
    "GRU": _recurrent,
    "LSTM": _recurrent,
    "RNN": _recurrent,
}


def type_standard_op_gaps(graph: GraphProto) -> bool:
    """Type (or complete) the outputs ONNX left untyped; True if any was typed."""
    types = known_types(graph)
    added = False
    for node in graph.node:
        rule = _GAP_RULES.get(node.op_type)
        if rule is None or node.domain not in ("", "ai.onnx"):
            continue
        input_types = [types.get(name) for name in node.input]
        for output, tensor_type in zip(node.output, rule(node, input_types), strict=False):
            if output and tensor_type is not None and knows_more(tensor_type, types.get(output)):
                set_value_info(graph, value_info(output, tensor_type))
                types[output] = tensor_type
                added = True
    return added
