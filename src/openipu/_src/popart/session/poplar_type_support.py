"""Element types Poplar's operations do not take, refused when a session compiles its graph.

PopART's IR does not hold an op's input types to the types its OpDefinition lists
(willow/src/op/add.cpp lists 32- and 64-bit integers and floats for Add, yet makes an AddOp of
any type): Poplar refuses them when prepareDevice builds the graph, with a poplar_exception
(int8_host_stream_test.py, test_fail_stream_int8_no_cast_then_op: an Add of streamed INT8 or
UINT8 tensors). 8-bit integers are for streaming and casting only.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
import tensorflow as tf

from openipu._src.popart.errors import poplar_exception

_EIGHT_BIT_INTEGERS = frozenset({tf.int8, tf.uint8})
_ARITHMETIC_OPS = frozenset({"Add"})


def check_poplar_types(graph: onnx.GraphProto, dtype_of: Callable[[str], tf.DType]) -> None:
    """Raises the poplar_exception Poplar raises for arithmetic on 8-bit integers."""
    for node in graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in _ARITHMETIC_OPS:
            continue
        for name in node.input:
            if name and dtype_of(name) in _EIGHT_BIT_INTEGERS:
                raise poplar_exception(
                    f"{node.op_type} '{node.name or node.output[0]}': Poplar has no "
                    f"{node.op_type} of {dtype_of(name).name} tensors (input "
                    f"'{name}'); cast 8-bit integers to a supported type first"
                )
