"""References of the original's Resize tests (operators_test/resize_test_0.py and
resize_test_1.py): onnx.reference's interpolation for the ONNX modes, and torch's nearest
and (bi/tri)linear/bicubic interpolation (torch is not installed) worked out from its
formulas; a Resize is linear in its data, so its exact gradient is the transposed Jacobian,
built column by column from the forward reference."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx.reference.ops.op_resize import (
    _cubic_coeffs,
    _interpolate_nd,
    _linear_coeffs,
    _nearest_coeffs,
)

import popart


def onnx_resize(data, scales, nearest_mode="round_prefer_floor", **attributes):
    """Nearest Resize by onnx.reference's interpolation (as the original's reference)."""

    def coeffs(ratio, scale=None):
        return _nearest_coeffs(ratio, mode=nearest_mode)

    return _interpolate_nd(data, coeffs, scale_factors=scales, **attributes).astype(data.dtype)


def torch_nearest_sources(in_size, scale):
    """torch.nn.functional.interpolate (nearest, scale_factor kept): output i copies input
    floor(i / scale)."""
    out_size = int(np.floor(in_size * scale))
    return np.minimum(np.floor(np.arange(out_size) / scale).astype(int), in_size - 1)


def torch_nearest(data, scales):
    out = data
    for axis, scale in enumerate(scales):
        if scale != 1.0:
            out = np.take(out, torch_nearest_sources(data.shape[axis], scale), axis=axis)
    return out


def check_nearest_times_x(op_tester, data, factors):
    """Train Resize-10(data) * x (x a distinct power of two per element); each input element
    gets the gradient of every output element that copies it."""
    scales = np.array([1.0] * (data.ndim - len(factors)) + list(factors), np.float32)
    out_shape = [int(np.floor(d * s)) for d, s in zip(data.shape, scales, strict=True)]
    x_data = (2.0 ** np.arange(np.prod(out_shape))).astype(np.float32).reshape(out_shape)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        d = builder.addInputTensor(data)
        x = builder.addInputTensor(x_data)
        o = builder.aiOnnx.resize([d, builder.aiOnnx.constant(scales)])
        o = builder.aiOnnx.mul([o, x])
        builder.addOutputTensor(o)
        return [o, g + d, g + o]

    def reference(ref_data):
        index = np.arange(data.size).reshape(data.shape)
        sources = torch_nearest(index, scales)
        upstream = ref_data.getOutputTensorGrad(0) * x_data
        grad = np.zeros(data.size, np.float64)
        np.add.at(grad, sources.reshape(-1), upstream.reshape(-1))
        return [
            torch_nearest(data, scales) * x_data,
            grad.reshape(data.shape).astype(np.float32),
            None,
        ]

    op_tester.setPatterns(["MulArgGradOp"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


def onnx_interpolate(data, scales, mode="linear", **attributes):
    """Linear or cubic (A = -0.75, as torch's bicubic) Resize by onnx.reference."""
    coeffs = {"linear": _linear_coeffs, "cubic": _cubic_coeffs}[mode]
    return _interpolate_nd(data, coeffs, scale_factors=scales, **attributes).astype(data.dtype)


def transposed_jacobian(
    forward: Callable[[np.ndarray], np.ndarray], shape: tuple[int, ...], upstream: np.ndarray
) -> np.ndarray:
    """d(sum(upstream * forward(x))) / dx for a `forward` linear in x, exactly (float64)."""
    grad = np.zeros(int(np.prod(shape)), np.float64)
    for index in range(grad.size):
        unit = np.zeros(grad.size, np.float64)
        unit[index] = 1.0
        grad[index] = np.sum(upstream.astype(np.float64) * forward(unit.reshape(shape)))
    return grad.reshape(shape)
