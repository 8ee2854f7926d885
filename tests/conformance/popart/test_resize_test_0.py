"""graphcore/popart tests/integration/operators_test/resize_test_0.py: nearest Resize-10 up
and down, its gradient in 1-D and 2-D (to the source element each output copies), Resize-11
under every nearest and coordinate-transformation mode (and PopART's "pytorch" nearest
mode), and a plain Resize-11 session (Cpu)."""

import numpy as np
import pytest
from popart_resize_checks import check_nearest_times_x, onnx_resize, torch_nearest

import popart


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
    check_nearest_times_x(op_tester, np.array([[[1, 2, 3, 4]]], np.float32), [scale_factor])


@pytest.mark.follows("test_resize_nearest_grad_2d")
@pytest.mark.parametrize("factor1, factor2", [(2, 3), (0.5, 0.25), (2, 0.5)])
def test_resize_nearest_grad_2d(op_tester, factor1, factor2):
    data = np.array([[[[1, 2, 3, 4], [5, 6, 7, 8]]]], np.float32)
    check_nearest_times_x(op_tester, data, [factor1, factor2])


@pytest.mark.follows("test_nearest_grad")
@pytest.mark.parametrize(
    "data_shape, scales", [([5, 3], [2.3, 2.5]), ([2, 8], [1.0, 3 / 8]), ([5, 3], [0.3, 0.5])]
)
def test_nearest_grad(op_tester, data_shape, scales):
    check_nearest_times_x(op_tester, np.random.rand(1, 1, *data_shape).astype(np.float32), scales)


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
