"""Floating-point operations of one run of an operation, by its type and shapes.

Matrix products and convolutions count 2 per multiply-add (what the chip's matrix
units do); elementwise and reduction operations count one per element; data
movement counts none (its cost is the bytes it moves).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Shape = Sequence[int]

#: Operation types that move or reinterpret data and compute nothing.
DATA_MOVEMENT = frozenset(
    {
        "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "Transpose", "ConcatV2",
        "Concat", "Split", "SplitV", "Slice", "StridedSlice", "Gather", "GatherV2", "GatherNd",
        "Pack", "Unpack", "Tile", "Pad", "PadV2", "Const", "Placeholder", "ReadVariableOp",
        "Cast", "Shape", "Fill", "ZerosLike", "OnesLike", "BroadcastTo", "NoOp", "Unsqueeze",
        "Flatten", "ResourceGather", "ScatterNd", "TensorScatterUpdate", "Reverse", "ReverseV2",
    }
)  # fmt: skip

#: Operations that are views of their inputs or host-side bookkeeping: free on the chip.
VIEWS = frozenset(
    {
        "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "Const", "Placeholder",
        "ReadVariableOp", "NoOp", "Shape", "ShapeN", "Size", "Rank", "StopGradient",
        "VarHandleOp", "VarIsInitializedOp", "XlaClusterOutput", "_Arg", "_Retval",
        "PreventGradient", "Snapshot", "EnsureShape", "TensorListReserve",
    }
)  # fmt: skip

MATMULS = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Gemm"})
CONVOLUTIONS = frozenset(
    {
        "Conv2D", "Conv3D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv",
        "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "ConvTranspose",
        "DepthwiseConv2dNativeBackpropFilter", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
    }
)  # fmt: skip


def _elements(shape: Shape) -> int:
    return math.prod(max(int(d), 0) for d in shape)


def matmul_flops(a: Shape, b: Shape, output: Shape) -> int:
    """2 x (output elements) x (the contracted dimension)."""
    if not a or not output:
        return 0
    contracted = int(a[-1]) if len(a) >= 1 else 1
    if len(b) >= 2 and len(a) >= 2 and int(a[-1]) not in (int(b[-2]), int(b[-1])):
        contracted = int(a[-2])  # transposed a
    return 2 * _elements(output) * max(contracted, 1)


def convolution_flops(op_type: str, inputs: Sequence[Shape], output: Shape) -> int:
    """2 x (output elements) x (kernel window x input channels per group), by the filter."""
    filters = [s for s in inputs if len(s) >= 3]
    if op_type in {"Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter",
                   "Conv3DBackpropFilterV2"}:  # fmt: skip
        # The output is the filter; the work equals the forward convolution's.
        image = max(filters, key=_elements, default=())
        return 2 * _elements(image) * max(_elements(output[:-1]) if output else 1, 1)
    if len(filters) < 2:
        return 2 * _elements(output)
    kernel = filters[1] if op_type not in {"Conv2DBackpropInput",
                                           "DepthwiseConv2dNativeBackpropInput",
                                           "Conv3DBackpropInputV2"} else filters[0]  # fmt: skip
    if len(kernel) < 3:
        kernel = filters[-1]
    # TF filters are [*window, in, out]; per output element: window x in.
    per_output = _elements(kernel[:-1])
    if op_type.startswith("Depthwise"):
        per_output = _elements(kernel[:-2])
    return 2 * _elements(output) * max(per_output, 1)


def einsum_flops(equation: str, inputs: Sequence[Shape]) -> int:
    """2 x the product of every index's size: each multiply-add of the contraction once
    (0 when the equation is missing or uses an ellipsis, whose dimensions it does not name)."""
    operands = equation.replace(" ", "").split("->")[0].split(",") if equation else []
    if not operands or "." in equation or len(operands) != len(inputs):
        return 0
    sizes: dict[str, int] = {}
    for letters, shape in zip(operands, inputs, strict=True):
        if len(letters) != len(shape):
            return 0
        for letter, size in zip(letters, shape, strict=True):
            sizes[letter] = max(sizes.get(letter, 1), int(size))
    return 2 * math.prod(sizes.values())


def flops(
    op_type: str, inputs: Sequence[Shape], outputs: Sequence[Shape], equation: str = ""
) -> tuple[int, bool]:
    """(flops of one run, whether it runs on the matrix units); `equation`: an Einsum's."""
    output = outputs[0] if outputs else ()
    if op_type in MATMULS and len(inputs) >= 2:
        return matmul_flops(inputs[0], inputs[1], output), True
    if op_type in CONVOLUTIONS:
        return convolution_flops(op_type, inputs, output), True
    if op_type == "Einsum" and inputs:
        counted = einsum_flops(equation, inputs)
        if counted:
            return counted, True
        # Without a usable equation: the larger operand times the output's last dimension.
        largest = max(_elements(s) for s in inputs)
        return 2 * max(largest, _elements(output)) * max(int(output[-1]) if output else 1, 1), True
    # Resource inputs are given as their variables' shapes (see tf_workload).
    if op_type in DATA_MOVEMENT or op_type.startswith(("Resource", "Assign", "Var", "Stack")):
        if op_type.startswith("ResourceApply"):
            # An optimizer update: a handful of operations per element of the variable.
            return 8 * max((_elements(s) for s in inputs[:1]), default=0), False
        return 0, False
    biggest_in = max((_elements(s) for s in inputs), default=0)
    return max(biggest_in, sum(_elements(s) for s in outputs)), False
