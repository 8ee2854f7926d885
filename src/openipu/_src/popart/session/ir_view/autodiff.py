"""The backward pass of a training session's IR (willow/src/transforms/autodiff/*): from the
loss's gradient, the ops on the way from the trained weights to the loss get grad ops, in
the reverse of the forward order; a tensor read by several of them gets one partial
gradient from each (`Gradient___<op id>_<index>`, willow/src/tensornames.cpp getEdgeGradId)
summed by a Sum op into `Gradient___<id>`.

Grad op types are the original's (willow/include/popart/graphcoreoperators.hpp,
GradOperators): one op per input for the binary ops (`AddArg0Grad`, `MatMulLhsGrad`...),
otherwise one `<type>Grad` op for all the inputs. Each grad op reads the gradient of the
forward op's output and the forward tensors its kind needs (willow/src/op/*.cpp
gradInputInfo, simplified: the other operand of a product, the input of a unary op, the
output as well where the original reads it). Of the patterns that rewrite grad ops
afterwards only the MatMul ones are applied (`matmul`), not SoftmaxGradDirect, OpToIdentity
on grad ops...
"""

from __future__ import annotations

from openipu._src.popart import reserved_names
from openipu._src.popart.session.ir_view.from_onnx import set_recompute
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor

# One grad op per input: the op's types by input index.
_PER_INPUT = {
    "MatMul": ("MatMulLhsGrad", "MatMulRhsGrad"),
    "Gemm": ("MatMulLhsGrad", "MatMulRhsGrad", "AddArg1Grad"),  # GemmDecomposition
    "Conv": ("ConvDataGrad", "ConvWeightsGrad", "ConvBiasGrad"),
    "Where": (None, "WhereXGrad", "WhereYGrad"),
    **{t: (f"{t}Arg0Grad", f"{t}Arg1Grad") for t in ("Add", "Sub", "Mul", "Div", "Pow", "Atan2")},
}
_VARIADIC = frozenset({"Sum", "Mean", "Max", "Min"})  # <type>ArgGrad, one per input
_LOSSES = {"IdentityLoss": "IdentityLossGrad", "L1": "L1Grad", "Nll": "NllGrad"}
# Grad ops that read only the gradient (no forward tensor).
_GRADIENT_ONLY = frozenset(
    "Add Sub Sum Identity Reshape Transpose Flatten Squeeze Unsqueeze Concat Slice Neg Cast "
    "Scale Expand Pad Split Tile Mean".split()
)
# Unary ops whose grad reads the forward output rather than the input.
_READS_OUTPUT = frozenset({"Softmax", "Sigmoid", "Tanh", "Exp", "Sqrt", "Relu", "LogSoftmax"})
# The other operand a product's grad op reads.
_OTHER_OPERAND = {"Mul": (1, 0), "MatMul": (1, 0), "Gemm": (1, 0), "Div": (1, 1)}


def gradient(tensor: str) -> str:
    return f"{reserved_names.reservedGradientPrefix()}{tensor}"


def _needing_gradients(graph: IrGraph, trained: set[str], loss: str) -> tuple[list[IrOp], set[str]]:
    """The forward ops the backward pass differentiates (on a path from a trained weight to
    the loss), and the tensors that get a gradient."""
    on_path_to_loss: set[int] = set()
    wanted = {loss}
    for op in reversed(graph.ops):
        if not op.is_grad and wanted.intersection(op.outputs.values()):
            on_path_to_loss.add(id(op))
            wanted.update(op.inputs.values())
    with_gradient = set(trained)
    ops = []
    for op in graph.ops:
        if id(op) in on_path_to_loss and with_gradient.intersection(op.inputs.values()):
            ops.append(op)
            with_gradient.update(op.outputs.values())
    return ops, with_gradient & wanted


def forward_reads(op: IrOp, index: int | None) -> list[tuple[str, int]]:
    """The forward tensors the grad op of `op` (for input `index`, None for all inputs)
    reads, as ("in" or "out", forward index) pairs (the original's gradInputInfo)."""
    if op.type in _GRADIENT_ONLY or op.type in _LOSSES:
        return []
    if op.type in _OTHER_OPERAND and index is not None:
        other = _OTHER_OPERAND[op.type][index] if index < 2 else None
        return [] if other is None or other not in op.inputs else [("in", other)]
    if op.type in _READS_OUTPUT:
        return [("out", 0)]
    return [("in", i) for i in op.inputs]


def grad_op_indices(op: IrOp) -> list[int | None]:
    """The input index each grad op of `op` is for (None: one grad op for all inputs)."""
    if op.type in _PER_INPUT:
        return [i for i, t in enumerate(_PER_INPUT[op.type]) if t and i in op.inputs]
    if op.type in _VARIADIC:
        return list(op.inputs)
    return [None]


def _reads(op: IrOp, index: int | None) -> dict[int, str]:
    tensors = [
        (op.inputs if kind == "in" else op.outputs)[i] for kind, i in forward_reads(op, index)
    ]
    return dict(enumerate(tensors, start=1))


def grow(graph: IrGraph, loss: str, trained: set[str], tensors: dict[str, IrTensor]) -> list[IrOp]:
    """The grad ops of the backward pass, in order (the original's autodiff)."""
    forward, with_gradient = _needing_gradients(graph, trained, loss)
    position = {id(op): n for n, op in enumerate(graph.ops)}
    partial_count: dict[str, int] = {}
    for op in forward:
        for tensor in op.inputs.values():
            if tensor in with_gradient:
                partial_count[tensor] = partial_count.get(tensor, 0) + 1
    partials: dict[str, list[str]] = {}
    grads: list[IrOp] = []

    def output_name(op: IrOp, index: int, tensor: str) -> str:
        name = gradient(tensor)
        if partial_count[tensor] > 1:
            name = f"{name.removesuffix(tensor)}{position[id(op)]}_{index}"
        _declare(tensors, name, tensor)
        partials.setdefault(tensor, []).append(name)
        return name

    def add(op: IrOp, grad_type: str, index: int | None) -> None:
        indices = [i for i, t in op.inputs.items() if t in with_gradient]
        if index is not None:
            indices = [index]
        out = op.outputs.get(0, "")
        inputs = {0: gradient(out), **_reads(op, index)}
        attributes = {
            k: v for k, v in op.attributes.items() if k.startswith("__") and k != "__recompute"
        }
        set_recompute(attributes, None)
        grads.append(
            IrOp(
                type=grad_type,
                name=op.name,
                inputs=inputs,
                outputs={i: output_name(op, i, op.inputs[i]) for i in indices},
                attributes=attributes,
                is_grad=True,
                forward=op,
            )
        )
        for i in indices:
            tensor = op.inputs[i]
            if len(partials[tensor]) == partial_count[tensor] > 1:
                grads.append(_sum(tensor, partials[tensor], op, tensors))

    for op in reversed(forward):
        if op.type in _LOSSES:
            add(op, _LOSSES[op.type], None)
        elif op.type in _PER_INPUT:
            for index, grad_type in enumerate(_PER_INPUT[op.type]):
                if grad_type and op.inputs.get(index) in with_gradient:
                    add(op, grad_type, index)
        elif op.type in _VARIADIC:
            for index, tensor in op.inputs.items():
                if tensor in with_gradient:
                    add(op, f"{op.type}ArgGrad", index)
        else:
            add(op, f"{op.type}Grad", None)
    return grads


def _sum(tensor: str, inputs: list[str], op: IrOp, tensors: dict[str, IrTensor]) -> IrOp:
    attributes = {k: v for k, v in op.attributes.items() if k.startswith("__")}
    set_recompute(attributes, None)
    _declare(tensors, gradient(tensor), tensor)
    return IrOp(
        type="Sum",
        name="GradSum",
        inputs=dict(enumerate(inputs)),
        outputs={0: gradient(tensor)},
        attributes=attributes,
        is_grad=True,
        forward=op,
    )


def _declare(tensors: dict[str, IrTensor], name: str, like: str) -> None:
    info = tensors.get(like)
    if info is not None and name not in tensors:
        tensors[name] = IrTensor(name, info.shape, info.data_type)
