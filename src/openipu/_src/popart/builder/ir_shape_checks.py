"""Shape checks the original's IR makes while typing its ops, with its messages.

PopART reports inputs of elementwise ops that do not broadcast as "np broadcasting
failed on '<op>', frames [..] and [..] are not aligned" (willow/src/tensorinfo.cpp,
npOutExceptionMessage) and reduction axes out of range, MatMul inputs that do not fit with "<op> contracting
dimensions unequal: ..." or "<op> doesn't support scalar tensor <id> as the lhs input"
(willow/src/op/matmul.cpp), and constant inputs Tile, Reshape and Expand cannot use; its tests match on those texts
(operators_test/binaryop_error_test.py, matmul_test_mismatched_inputs.py,
matmul_test_scalar_input.py). ONNX's checker would report the same models in its own
words, so these checks run first.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, numpy_helper

from openipu._src.popart.builder.ir_op_refusals import (
    LIMITED_OPS,
    check_op_limits,
    tensors_without_data,
)
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


def _opid(node: NodeProto, model: ModelProto) -> str:
    """The IR's id of an op's type: domain.Type:version."""
    domain = node.domain or "ai.onnx"
    opset = next((o.version for o in model.opset_import if (o.domain or "ai.onnx") == domain), None)
    version = ""
    if opset is not None:
        try:
            version = f":{onnx.defs.get_schema(node.op_type, opset, node.domain).since_version}"
        except (onnx.defs.SchemaError, TypeError):  # no schema, or an opset out of range
            pass
    return f"{domain}.{node.op_type}{version}"


def _describe(node: NodeProto, model: ModelProto) -> str:
    """The IR's name of an op: Op(domain.Type:version, inputs=[..], outputs=[..])."""
    return (
        f"Op({_opid(node, model)}, inputs=[{', '.join(node.input)}], "
        f"outputs=[{', '.join(node.output)}])"
    )


# Inputs whose values fix an op's output shape, which the IR reads at compile time
# (willow/src/op/slice.cpp, reshape.cpp, expand.cpp; operators_test/slice_test.py).
_SHAPE_FIXING_INPUTS = {
    "Slice": ("starts", "ends", "axes", "steps"),
    "Reshape": ("shape",),
    "Expand": ("shape",),
}


def _check_values_known(node: NodeProto, model: ModelProto) -> None:
    """Refuse an op whose shape-fixing input is fed from the host at run time."""
    names = _SHAPE_FIXING_INPUTS.get(node.op_type, ())
    streamed = {i.name for i in model.graph.input} - {t.name for t in model.graph.initializer}
    for name, tensor in zip(names, node.input[1:], strict=False):
        if tensor in streamed:
            raise popart_exception(
                f"Need the value of the {_opid(node, model)} input '{name}' to determine the "
                "output shape, but was unable because [Tensor::getDataViaGraphTraversal] Could "
                f"not work out tensor data for {tensor}."
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


def _constant_values(model: ModelProto, name: str) -> np.ndarray | None:
    """The data of a tensor made by a Constant node or an initializer, else None."""
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output and node.output[0] == name:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            return None if value is None else numpy_helper.to_array(value)
    for tensor in model.graph.initializer:
        if tensor.name == name and tensor.data_location != onnx.TensorProto.EXTERNAL:
            try:
                return numpy_helper.to_array(tensor)
            except (ValueError, TypeError, onnx.checker.ValidationError):
                return None  # a malformed initializer: the model check reports it
    return None


def _check_tile(node: NodeProto, model: ModelProto, types: dict) -> None:
    """Tile's repeats must be a constant with one non-negative count per data dimension
    (willow/src/op/tile.cpp, connectInTensor; the negative count is the Builder's
    "invalid shape" of willow/src/builder_impl.cpp; operators_test/tile_test.py)."""
    if len(node.input) < 2:
        return
    data, repeats_id = node.input[0], node.input[1]
    if any(i.name == repeats_id for i in model.graph.input) and not any(
        t.name == repeats_id for t in model.graph.initializer
    ):
        raise popart_exception(f"The 'Repeats' Tensor `{repeats_id}' must be of type Constant")
    repeats = _constant_values(model, repeats_id)
    shape = types[data].shape if data in types else None
    if repeats is None or shape is None or None in shape:
        return
    if repeats.size != len(shape):
        raise popart_exception(
            f"'Repeats' tensor `{repeats_id}' should have one element for each dimension of "
            "the data tensor"
        )
    out_shape = [int(d * r) for d, r in zip(shape, repeats.reshape(-1), strict=True)]
    if any(d < 0 for d in out_shape):
        raise popart_exception(
            f"Output '{node.output[0]}' of node '{node.name}' has invalid shape, "
            f"[{' '.join(map(str, out_shape))}]. Values must be non-negative in each shape "
            "dimension."
        )


def _check_reshape(node: NodeProto, model: ModelProto) -> None:
    """A constant target shape may infer one dim by -1 (willow/src/op/reshape.cpp;
    operators_test/reshape_test.py)."""
    shape = _constant_values(model, node.input[1]) if len(node.input) > 1 else None
    if shape is not None and int((shape == -1).sum()) > 1:
        raise popart_exception(
            "shape input to ReshapeOp can only use -1 to specify one unknown dimension"
        )


_VARIADIC_OPS = frozenset({"Sum", "Mean", "Max", "Min"})


def _check_variadic_6(node: NodeProto, model: ModelProto, found: list) -> None:
    """Version 6 of Sum, Mean, Max and Min does not broadcast: its inputs must agree in type
    and shape (willow/src/op/variadic.cpp; operators_test/sum_mean_test.py)."""
    name = _describe(node, model)
    if not name.split(",")[0].endswith(":6") or None in found:
        return
    if any(t.elem_type != found[0].elem_type or t.shape != found[0].shape for t in found):
        domain = node.domain or "ai.onnx"
        raise popart_exception(
            f"Inputs to {domain}.{node.op_type}:6 do not all the same type & shape, "
            "with opid.version = 6"
        )


def _check_expand(node: NodeProto, model: ModelProto, types: dict) -> None:
    """Expand's constant shape broadcasts with its input (willow/src/op/expand.cpp,
    finaliseShape; operators_test/expand_test.py)."""
    target = _constant_values(model, node.input[1]) if len(node.input) > 1 else None
    known = types.get(node.input[0])
    if target is None or known is None or known.shape is None or None in known.shape:
        return
    if not _broadcastable(tuple(int(d) for d in target.reshape(-1)), known.shape):
        raise popart_exception(
            "Expand shape constraint: corresponding dimensions must have the same value or "
            "one of them must be 1"
        )


def _tensor_info(tensor_type) -> str:
    """A tensor's type and shape as the IR prints them (willow/src/tensorinfo.cpp, append)."""
    name = onnx.TensorProto.DataType.Name(tensor_type.elem_type)
    return f"{name:<8}{_dims(tensor_type.shape)}"


def _check_nll(node: NodeProto, model: ModelProto, types: dict) -> None:
    """Nll's labels have all but the last dimension of its probabilities
    (willow/src/op/nll.cpp, NllOp::setup; operators_test/loss_test.py)."""
    probs, labels = (types.get(name) for name in node.input[:2])
    if probs is None or labels is None or probs.shape is None or labels.shape is None:
        return
    if probs.shape and tuple(labels.shape) != tuple(probs.shape[:-1]):
        raise popart_exception(
            f"The label tensor ({_tensor_info(labels)}) must have shape "
            f"{_dims(probs.shape[:-1])} to match all but the final dimension of the "
            f"probabilities tensor ({_tensor_info(probs)}) in Op {_describe(node, model)}. "
        )


def check_ir_shapes(model: ModelProto) -> None:
    """Raise the IR's error for the first op of the main graph whose known input shapes
    do not fit together (elementwise broadcasting, MatMul, reduction axes)."""
    types = known_types(model.graph)
    without_data = tensors_without_data(model)
    for node in model.graph.node:
        if node.domain in ("", "ai.onnx") and node.op_type in LIMITED_OPS and node.input:
            first_type = types.get(node.input[0])
            shape = None if first_type is None else first_type.shape
            check_op_limits(node, _opid(node, model), _describe(node, model), shape, without_data)
        if node.op_type.startswith("Reduce") and node.input and node.input[0] in types:
            _check_reduce_axes(node, types[node.input[0]].shape)
        if node.domain in ("", "ai.onnx") and node.op_type in _SAME_TYPE_OPS:
            _check_types(node, model, [types.get(name) for name in node.input])
        if node.domain in ("", "ai.onnx") and node.op_type in _VARIADIC_OPS:
            _check_variadic_6(node, model, [types.get(name) for name in node.input])
        if node.domain == "ai.graphcore" and node.op_type == "Nll" and len(node.input) > 1:
            _check_nll(node, model, types)
        if node.domain in ("", "ai.onnx"):
            _check_values_known(node, model)
        if node.domain in ("", "ai.onnx") and node.op_type == "Expand":
            _check_expand(node, model, types)
        if node.domain in ("", "ai.onnx") and node.op_type == "Tile":
            _check_tile(node, model, types)
        if node.domain in ("", "ai.onnx") and node.op_type == "Reshape":
            _check_reshape(node, model)
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
