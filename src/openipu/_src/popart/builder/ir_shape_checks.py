"""Shape checks the original's IR makes while typing its ops, with its messages.

PopART reports inputs of elementwise ops that do not broadcast as "np broadcasting
failed on '<op>', frames [..] and [..] are not aligned" (willow/src/tensorinfo.cpp,
npOutExceptionMessage) and reduction axes out of range, MatMul inputs that do not fit with "<op> contracting
dimensions unequal: ..." or "<op> doesn't support scalar tensor <id> as the lhs input"
(willow/src/op/matmul.cpp); its tests match on those texts
(operators_test/binaryop_error_test.py, matmul_test_mismatched_inputs.py,
matmul_test_scalar_input.py). ONNX's checker would report the same models in its own
words, so these checks run first.
"""

from __future__ import annotations

import math

import onnx
from onnx import ModelProto, NodeProto

from openipu._src.popart.builder.shape_types import known_types
from openipu._src.popart.errors import popart_exception

# ONNX ops whose inputs broadcast numpy-style (multidirectional broadcasting).
_BROADCASTING_OPS = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Equal",
        "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor", "BitShift",
        "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Where",
    }
)  # fmt: skip


def _broadcastable(a: tuple[int | None, ...], b: tuple[int | None, ...]) -> bool:
    return all(
        x is None or y is None or x == y or x == 1 or y == 1
        for x, y in zip(reversed(a), reversed(b), strict=False)
    )


def _describe(node: NodeProto, model: ModelProto) -> str:
    """The IR's name of an op: Op(domain.Type:version, inputs=[..], outputs=[..])."""
    domain = node.domain or "ai.onnx"
    opset = next((o.version for o in model.opset_import if (o.domain or "ai.onnx") == domain), None)
    version = ""
    if opset is not None:
        try:
            version = f":{onnx.defs.get_schema(node.op_type, opset, node.domain).since_version}"
        except onnx.defs.SchemaError:
            pass
    return (
        f"Op({domain}.{node.op_type}{version}, inputs=[{', '.join(node.input)}], "
        f"outputs=[{', '.join(node.output)}])"
    )


def _dims(shape: tuple[int | None, ...]) -> str:
    return "[" + " ".join("?" if d is None else str(d) for d in shape) + "]"


def _check_matmul(node: NodeProto, model: ModelProto, shapes: list) -> None:
    if len(shapes) != 2 or None in shapes:
        return
    for side, shape, name in zip(("lhs", "rhs"), shapes, node.input, strict=True):
        if not shape:
            raise popart_exception(
                f"{_describe(node, model)} doesn't support scalar tensor {name} as the {side} input"
            )
    lhs, rhs = shapes
    contracted = (lhs[-1], rhs[-2] if len(rhs) > 1 else rhs[0])
    if None not in contracted and contracted[0] != contracted[1]:
        raise popart_exception(
            f"{_describe(node, model)} contracting dimensions unequal: lhs '{node.input[0]}' "
            f"{_dims(lhs)}, rhs '{node.input[1]}' {_dims(rhs)}"
        )


def _check_reduce_axes(node: NodeProto, shape: tuple[int | None, ...] | None) -> None:
    """Reductions refuse axes outside [-rank, rank - 1] (willow/src/op/reduce.cpp,
    validateReduceAxes; operators_test/reduce_invalid_axes_test.py)."""
    if shape is None:
        return
    rank = len(shape)
    for attribute in node.attribute:
        if attribute.name != "axes":
            continue
        for axis in attribute.ints:
            if not -rank <= axis < rank:
                raise popart_exception(
                    f"Axis {axis} is out of acceptable range [{-rank}, {rank - 1}]"
                )


# Elementwise binary ops of the IR whose inputs must have one type (willow/src/op/
# elementwise.cpp); Mul allows float16 by a one-element float32 (willow/src/op/mul.cpp).
_SAME_TYPE_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Pow"})


def _check_types(node: NodeProto, model: ModelProto, found: list) -> None:
    if len(found) != 2 or None in found:
        return
    first, second = found
    if first.elem_type == second.elem_type or None in (first.shape, second.shape):
        return
    names = {first.elem_type, second.elem_type}
    single = [t for t in found if t.elem_type == onnx.TensorProto.FLOAT and t.shape is not None
              and None not in t.shape and math.prod(t.shape) == 1]  # fmt: skip
    if node.op_type == "Mul" and names == {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16}:
        if single:
            return
    # Mul names the op by itself, the others as "Op <op>" (willow/src/op.cpp, prettyNpOut).
    name = _describe(node, model)
    where = name if node.op_type == "Mul" else f"Op {name}"
    type_names = [onnx.TensorProto.DataType.Name(t.elem_type) for t in found]
    raise popart_exception(
        f"np broadcasting failed on {where}, incompatible types {type_names[0]} and "
        f"{type_names[1]} (shapes {_dims(first.shape)} and {_dims(second.shape)})"
    )


def check_ir_shapes(model: ModelProto) -> None:
    """Raise the IR's error for the first op of the main graph whose known input shapes
    do not fit together (elementwise broadcasting, MatMul, reduction axes)."""
    types = known_types(model.graph)
    for node in model.graph.node:
        if node.op_type.startswith("Reduce") and node.input and node.input[0] in types:
            _check_reduce_axes(node, types[node.input[0]].shape)
        if node.domain in ("", "ai.onnx") and node.op_type in _SAME_TYPE_OPS:
            _check_types(node, model, [types.get(name) for name in node.input])
        if node.domain in ("", "ai.onnx") and node.op_type == "MatMul":
            inputs = [types[name].shape if name in types else None for name in node.input]
            _check_matmul(node, model, inputs)
        if node.domain not in ("", "ai.onnx") or node.op_type not in _BROADCASTING_OPS:
            continue
        shapes = [types[name].shape for name in node.input if name in types]
        known = [shape for shape in shapes if shape is not None]
        for first, second in zip(known, known[1:], strict=False):
            if not _broadcastable(first, second):
                frames = [", ".join(str(d) for d in shape) for shape in (first, second)]
                raise popart_exception(
                    f"np broadcasting failed on '{_describe(node, model)}', frames "
                    f"[{frames[0]}] and [{frames[1]}] are not aligned"
                )
