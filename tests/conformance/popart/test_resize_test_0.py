"""graphcore/popart tests/integration/operators_test/resize_test_0.py: nearest Resize-10 up
and down, its gradient in 1-D and 2-D (to the source element each output copies), Resize-11
under every nearest and coordinate-transformation mode (and PopART's "pytorch" nearest
mode), and a plain Resize-11 session (Cpu)."""

import numpy as np
import pytest
from onnx.reference.ops.op_resize import _interpolate_nd, _nearest_coeffs

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


def _resize_times_x(op_tester, data, factors):
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


@pytest.mark.follows("test_resize_10")
@pytest.mark.parametrize("data_shape, scales", [([2, 2], [2.0, 3.0]), ([2, 4], [0.5, 0.5])])
def test_resize_10(op_tester, data_shape, scales):
    data = np.random.rand(1, 1, *data_shape).astype(np.float32)
    scales = np.array([1.0, 1.0] + scales, np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.resize([builder.addInputTensor(data), builder.aiOnnx.constant(scales)])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [onnx_resize(data, scales)], "infer")


@pytest.mark.follows("test_resize_nearest_grad_1d")
@pytest.mark.parametrize("scale_factor", [2, 3, 0.5, 0.25])
def test_resize_nearest_grad_1d(op_tester, scale_factor):
    _resize_times_x(op_tester, np.array([[[1, 2, 3, 4]]], np.float32), [scale_factor])


@pytest.mark.follows("test_resize_nearest_grad_2d")
@pytest.mark.parametrize("factor1, factor2", [(2, 3), (0.5, 0.25), (2, 0.5)])
def test_resize_nearest_grad_2d(op_tester, factor1, factor2):
    data = np.array([[[[1, 2, 3, 4], [5, 6, 7, 8]]]], np.float32)
    _resize_times_x(op_tester, data, [factor1, factor2])


@pytest.mark.follows("test_nearest_grad")
@pytest.mark.parametrize(
    "data_shape, scales", [([5, 3], [2.3, 2.5]), ([2, 8], [1.0, 3 / 8]), ([5, 3], [0.3, 0.5])]
)
def test_nearest_grad(op_tester, data_shape, scales):
    _resize_times_x(op_tester, np.random.rand(1, 1, *data_shape).astype(np.float32), scales)


@pytest.mark.slow
@pytest.mark.follows("test_resize_11")
@pytest.mark.parametrize(
    "data_shape, scales",
    [
        ([8], [1.12]),
        ([2], [8.0]),
        ([5, 3], [2.3, 2.5]),
        ([2, 8], [1.0, 3 / 8]),
        ([5, 3], [0.3, 0.5]),
    ],
)
@pytest.mark.parametrize(
    "nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "pytorch"]
)
@pytest.mark.parametrize(
    "coordinate_transformation_mode",
    ["half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"],
)
def test_resize_11(op_tester, data_shape, scales, nearest_mode, coordinate_transformation_mode):
    if nearest_mode == "pytorch":
        data_shape, scales = [1, 1] + data_shape, [1.0, 1.0] + scales
    data = np.random.rand(*data_shape).astype(np.float32)
    scales = np.array(scales, np.float32)

    def init_builder(builder):
        d = builder.addInputTensor(data)
        s = builder.aiOnnxOpset11.constant(scales, False)
        r = builder.aiOnnxOpset11.constant(np.array([], np.float32), False)
        o = builder.aiOnnxOpset11.resize(
            [d, r, s],
            nearest_mode=nearest_mode,
            coordinate_transformation_mode=coordinate_transformation_mode,
        )
        builder.addOutputTensor(o)
        return [o]

    def reference(_):
        if nearest_mode == "pytorch":
            return [torch_nearest(data, scales)]
        return [
            onnx_resize(
                data, scales, nearest_mode=nearest_mode,
                coordinate_transformation_mode=coordinate_transformation_mode,
            )
        ]  # fmt: skip

    op_tester.run(init_builder, reference, "infer")


@pytest.mark.follows("test_resize_11_debug")
def test_resize_11_debug():
    data = np.random.rand(1, 1, 2, 2).astype(np.float32)
    scales = np.array([1.0, 1.0, 2.0, 3.0], np.float32)
    builder = popart.Builder()
    d = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 2, 2]))
    s = builder.aiOnnxOpset11.constant(scales, False)
    r = builder.aiOnnxOpset11.constant(np.array([], np.float32), False)
    o = builder.aiOnnxOpset11.resize([d, r, s])
    builder.addOutputTensor(o)
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createCpuDevice(),
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    session.run(popart.PyStepIO({d: data}, anchors))
    np.testing.assert_allclose(anchors[o], onnx_resize(data, scales))
