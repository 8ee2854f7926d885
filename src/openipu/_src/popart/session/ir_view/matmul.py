"""The original's mandatory MatMul patterns (willow/src/patterns/matmulgradpattern.cpp),
applied to the IR description:

- `MatMulOp` (before autodiff): a MatMul with an input of rank below 3 reads both inputs
  reshaped to their expanded (at least 3-d) shapes and its output is reshaped back; when
  the rhs has a single group, the lhs's group dimension is folded into its rows
  (`[2 384 1024]` becomes `[1 768 1024]`), so that no ReduceSum is needed for the rhs's
  gradient;
- `MatMulLhsGradOp`, `MatMulRhsGradOp` (after autodiff): each MatMul grad op becomes a
  Transpose of the forward operand and a MatMul with the output's gradient, followed, where
  the product's shape is not the gradient's, by a squeeze (Reshape), a ReduceSum and a
  Reshape. Reshapes that change no shape are not made (the original makes them and its
  OpToIdentity and PostNRepl patterns remove them in the same pass).

New tensors are named as Ir::createIntermediateTensorId names them (`<id>__t<n>`).
"""

from __future__ import annotations

from openipu._src.popart.session.ir_view.from_onnx import set_recompute
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor
from openipu._src.popart.session.ir_view.patterns import PatternContext

Shape = tuple[int, ...]


def _expanded(lhs: Shape, rhs: Shape) -> tuple[Shape, Shape]:
    """MatMulOp::npMatMulOut's expanded input shapes: a 1-d lhs gets a leading 1, a 1-d rhs a
    trailing 1, and a 2-d operand a group dimension of 1 (willow/src/op/matmul.cpp)."""
    if len(lhs) == 1:
        lhs = (1, *lhs)
    if len(rhs) == 1:
        rhs = (*rhs, 1)
    if len(lhs) == 2:
        lhs = (1, *lhs)
    if len(rhs) == 2:
        rhs = (1, *rhs)
    return lhs, rhs


def _broadcast(a: Shape, b: Shape) -> Shape:
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    return tuple(x if y == 1 else y for x, y in zip(a, b, strict=True))


def _product(lhs: Shape, rhs: Shape) -> Shape:
    """The shape of a MatMul of operands of rank at least 3."""
    return (*_broadcast(lhs[:-2], rhs[:-2]), lhs[-2], rhs[-1])


class _Maker:
    """Makes the ops replacing one op, with its placement, and their tensors."""

    def __init__(self, op: IrOp, context: PatternContext) -> None:
        self.op = op
        self.context = context
        self.made: list[IrOp] = []
        self.data_type = context.tensors.get(op.inputs[0], IrTensor("", None, "FLOAT")).data_type

    def tensor(self, base: str, shape: Shape) -> str:
        name = self.context.intermediate(base)
        self.context.tensors[name] = IrTensor(name, shape, self.data_type)
        return name

    def add(
        self, op_type: str, inputs: list[str], output: str, extra: dict[str, str] | None = None
    ) -> str:
        attributes = {k: v for k, v in self.op.attributes.items() if k.startswith("__")}
        set_recompute(attributes, self.op.attributes.get("recomputetype"))
        attributes.update(extra or {})
        self.made.append(
            IrOp(
                type=op_type,
                name=self.op.name,
                inputs=dict(enumerate(inputs)),
                outputs={0: output},
                attributes=attributes,
                excluded_patterns=self.op.excluded_patterns,
                is_grad=self.op.is_grad,
                forward=self.op.forward,
                schedule_priority=self.op.schedule_priority,
            )
        )
        return output

    def reshape(self, tensor: str, shape: Shape, output: str | None = None) -> str:
        if self.context.shape(tensor) == shape and output is None:
            return tensor
        return self.add("Reshape", [tensor], output or self.tensor(tensor, shape))


def _replace(graph: IrGraph, op: IrOp, ops: list[IrOp]) -> None:
    at = graph.ops.index(op)
    graph.ops[at : at + 1] = ops


def decompose_matmul(graph: IrGraph, op: IrOp, context: PatternContext) -> bool:
    """The `MatMulOp` pattern."""
    lhs_shape, rhs_shape = context.shape(op.inputs.get(0, "")), context.shape(op.inputs.get(1, ""))
    if op.type != "MatMul" or op.is_grad or lhs_shape is None or rhs_shape is None:
        return False
    if len(lhs_shape) >= 3 and len(rhs_shape) >= 3 or not lhs_shape or not rhs_shape:
        return False
    lhs, rhs = _expanded(lhs_shape, rhs_shape)
    if len(lhs) == 3 and len(rhs) == 3 and rhs[0] == 1:
        lhs = (1, lhs[0] * lhs[1], lhs[2])
    maker = _Maker(op, context)
    # The original always makes the three Reshapes (OpToIdentity removes those of no effect).
    lhs_in = maker.add("Reshape", [op.inputs[0]], maker.tensor(op.inputs[0], lhs))
    rhs_in = maker.add("Reshape", [op.inputs[1]], maker.tensor(op.inputs[1], rhs))
    out = op.outputs[0]
    product = maker.tensor(out, _product(lhs, rhs))
    op.inputs = {**op.inputs, 0: lhs_in, 1: rhs_in}
    op.outputs = {0: product}
    maker.made.append(op)
    maker.add("Reshape", [product], out)
    _replace(graph, op, maker.made)
    return True


def decompose_grad(graph: IrGraph, op: IrOp, context: PatternContext) -> bool:
    """The `MatMulLhsGradOp` and `MatMulRhsGradOp` patterns."""
    forward = op.forward
    if op.type not in ("MatMulLhsGrad", "MatMulRhsGrad") or forward is None:
        return False
    if forward.type != "MatMul":  # a Gemm's grad ops (GemmDecomposition is not modelled)
        return False
    shapes = [context.shape(forward.inputs.get(i, "")) for i in (0, 1)]
    if shapes[0] is None or shapes[1] is None:
        return False
    lhs, rhs = _expanded(shapes[0], shapes[1])
    out_shape = _product(lhs, rhs)
    lhs_side = op.type == "MatMulLhsGrad"
    gradient_out = op.outputs[min(op.outputs)]
    target = context.shape(gradient_out)
    if target is None:
        return False
    maker = _Maker(op, context)
    grad_in = maker.reshape(op.inputs[0], out_shape)
    operand = op.inputs[1]  # the rhs for the lhs's gradient, the lhs for the rhs's
    operand = maker.reshape(operand, rhs if lhs_side else lhs)
    operand_shape = rhs if lhs_side else lhs
    perm = list(range(len(operand_shape)))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    transposed_shape = tuple(operand_shape[p] for p in perm)
    transposed = maker.add(
        "Transpose",
        [operand],
        maker.tensor(operand, transposed_shape),
        {"perm": "[" + " ".join(map(str, perm)) + "]"},
    )
    inputs = [grad_in, transposed] if lhs_side else [transposed, grad_in]
    product_shape = (
        _product(out_shape, transposed_shape) if lhs_side else _product(transposed_shape, out_shape)
    )
    # The MatMul keeps the grad op's phase (BwdLHS 1, BwdRHS 2) in its fully_connected_pass
    # outline attribute (willow/src/op/matmul.cpp, appendOutlineAttributes, with
    # SessionOptions.enableFullyConnectedPass at its default), so outlining never takes it
    # for a forward MatMul.
    phase = {"fully_connected_pass": "1" if lhs_side else "2"}
    if product_shape == target:
        maker.add("MatMul", inputs, gradient_out, phase)
    else:
        product = maker.add("MatMul", inputs, maker.tensor(gradient_out, product_shape), phase)
        _reduce(maker, product, product_shape, target, gradient_out)
    _replace(graph, op, maker.made)
    return True


def _reduce(maker: _Maker, product: str, shape: Shape, target: Shape, gradient_out: str) -> None:
    """The product squeezed of its leading ones (and, for a 1-d gradient, its trailing
    ones), then summed over the dimensions it still differs in and reshaped."""
    squeeze: list[int] = []
    for i, d in enumerate(shape):
        if d != 1:
            break
        squeeze.append(i)
    squeezed = tuple(d for i, d in enumerate(shape) if i not in squeeze)
    if squeezed != target and len(target) == 1 and squeezed:
        for i in reversed(range(len(shape))):
            if shape[i] != 1:
                break
            squeeze.append(i)
    if squeeze:
        squeezed = tuple(d for i, d in enumerate(shape) if i not in squeeze)
        if squeezed == target:
            maker.add("Reshape", [product], gradient_out)
            return
        product = maker.add("Reshape", [product], maker.tensor(product, squeezed))
        shape = squeezed
    padded, padded_target = shape, target
    padded = (1,) * (len(padded_target) - len(padded)) + padded
    padded_target = (1,) * (len(padded) - len(padded_target)) + padded_target
    axes = [i for i, (a, b) in enumerate(zip(padded, padded_target, strict=True)) if a != b]
    reduced_shape = tuple(d for i, d in enumerate(padded) if i not in axes)
    reduced = maker.add(
        "ReduceSum",
        [product],
        maker.tensor(product, reduced_shape),
        {"axes": "[" + " ".join(map(str, axes)) + "]", "keepdims": "0"},
    )
    maker.add("Reshape", [reduced], gradient_out)
