"""graphcore/popart tests/integration/operators_test/resize_test_1.py: Resize with float16
scales (opsets 10 and 11), odd scale factors (nearest, forward and gradient), linear and cubic
Resize-11 under each coordinate transformation mode, cubic gradients, sizes instead of
scales, PopART's torch-like (bi/tri)linear resizing, and the error when both sizes and scales
are given, against onnx.reference and torch's interpolation formulas (Cpu)."""

import numpy as np
import pytest
from popart_resize_checks import (
    check_nearest_times_x,
    onnx_interpolate,
    onnx_resize,
    torch_nearest,
    transposed_jacobian,
)

import popart

G = popart.reservedGradientPrefix()
EMPTY_ROI = np.array([], np.float32)


def _resize11(builder, data_id, scales=None, sizes=None, **attributes):
    """Resize-11 of constant scales or sizes (the other one left out, as an empty name)."""
    roi = builder.aiOnnxOpset11.constant(EMPTY_ROI, False)
    inputs = [data_id, roi, "" if scales is None else builder.aiOnnxOpset11.constant(scales, False)]
    if sizes is not None:
        inputs.append(builder.aiOnnxOpset11.constant(sizes, False))
    return builder.aiOnnxOpset11.resize(inputs, **attributes)


def _infer(op_tester, data, add_resize, expected):
    def init_builder(builder):
        o = add_resize(builder, builder.addInputTensor(data))
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [expected], "infer")


@pytest.mark.follows("test_float16_scales")
def test_float16_scales(op_tester):
    data = np.random.rand(1, 1, 2, 2).astype(np.float32)
    scales = np.array([1.0, 1.0, 2.0, 3.0], np.float16)
    _infer(
        op_tester,
        data,
        lambda b, d: b.aiOnnx.resize([d, b.aiOnnx.constant(scales)]),
        torch_nearest(data, scales.astype(np.float32)),
    )


@pytest.mark.follows("test_resize11_float16_scales")
def test_resize11_float16_scales(op_tester):
    data = np.random.rand(1, 1, 2, 2).astype(np.float32)
    scales = np.array([1.0, 1.0, 2.0, 3.0], np.float16)

    def add_resize(builder, d):
        r = builder.aiOnnxOpset11.constant(EMPTY_ROI, False)
        return builder.aiOnnxOpset11.resize([d, r, builder.aiOnnxOpset11.constant(scales)])

    _infer(op_tester, data, add_resize, torch_nearest(data, scales.astype(np.float32)))


@pytest.mark.follows("test_odd_scale_factors")
@pytest.mark.parametrize("scale_factor, data_shape", [(3.0001, 2), (0.51, 6)])
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "pytorch"])
def test_odd_scale_factors(op_tester, nearest_mode, scale_factor, data_shape):
    data = np.random.rand(1, 1, data_shape).astype(np.float32)
    scales = np.array([1.0, 1.0, scale_factor], np.float32)

    def add_resize(builder, d):
        o = builder.aiOnnx.resize([d, builder.aiOnnx.constant(scales)])
        builder.addNodeAttribute("nearest_mode", nearest_mode, {o})
        return o

    if nearest_mode == "pytorch":
        expected = torch_nearest(data, scales)
    else:
        # As the original's reference: onnx's interpolation with its default (half_pixel)
        # coordinate transformation.
        expected = onnx_resize(data, scales)
    _infer(op_tester, data, add_resize, expected)


@pytest.mark.follows("test_odd_scale_factors_grad")
@pytest.mark.parametrize("scale_factor, data_shape", [(3.0001, 2), (0.51, 6)])
def test_odd_scale_factors_grad(op_tester, scale_factor, data_shape):
    check_nearest_times_x(
        op_tester, np.random.rand(1, 1, data_shape).astype(np.float32), [scale_factor]
    )


COORDINATE_MODES = ["half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"]


@pytest.mark.follows("test_resize_linear")
@pytest.mark.parametrize(
    "data_shape, scales",
    [
        ([8], [1.12]),  # new values, the same size
        ([2], [8.0]),
        ([5, 3], [2.3, 2.5]),
        ([2, 8], [1.0, 3 / 8]),
        ([5, 3], [0.3, 0.5]),
        ([5, 3, 4], [2.3, 2.5, 0.5]),
    ],
)
@pytest.mark.parametrize("coordinate_transformation_mode", COORDINATE_MODES)
def test_resize_linear(op_tester, data_shape, scales, coordinate_transformation_mode):
    _interpolated(op_tester, data_shape, scales, "linear", coordinate_transformation_mode)


def _interpolated(op_tester, data_shape, scales, mode, coordinate_transformation_mode):
    """Resize-11 (linear or cubic) of random data against onnx.reference's."""
    data = np.random.rand(*data_shape).astype(np.float32)
    scales = np.array(scales, np.float32)
    ctm = {"coordinate_transformation_mode": coordinate_transformation_mode}
    _infer(
        op_tester,
        data,
        lambda b, d: _resize11(b, d, scales, mode=mode, **ctm),
        onnx_interpolate(data, scales, mode, **ctm),
    )


@pytest.mark.follows("test_resize_sizes_input")
@pytest.mark.parametrize(
    "data_shape, sizes",
    [([4], [4]), ([4], [8]), ([8], [3]), ([4, 4], [9, 9]), ([4, 4], [5, 3])],
)
@pytest.mark.parametrize("sizes_dtype", [np.int64, np.int32])
def test_resize_sizes_input(op_tester, data_shape, sizes, sizes_dtype):
    data = np.random.rand(*data_shape).astype(np.float32)
    sizes = np.array(sizes, sizes_dtype)
    expected = onnx_resize(data, [o / i for i, o in zip(data.shape, sizes, strict=True)])
    assert expected.shape == tuple(sizes)
    _infer(op_tester, data, lambda b, d: _resize11(b, d, sizes=sizes), expected)


@pytest.mark.follows("test_resize_cubic")
@pytest.mark.parametrize(
    "data_shape, scales",
    [
        ([8], [1.12]),
        ([2], [8.0]),
        ([2, 2], [2.0, 3.0]),
        ([5, 3], [2.3, 2.5]),
        ([2, 8], [1.0, 3 / 8]),
        ([5, 4], [0.5, 0.5]),
        ([5, 3, 4], [2.3, 2.5, 0.5]),
    ],
)
@pytest.mark.parametrize("coordinate_transformation_mode", COORDINATE_MODES)
def test_resize_cubic(op_tester, data_shape, scales, coordinate_transformation_mode):
    # Rounding adds up with the dimensions (as the original's tolerances).
    op_tester.atol = {1: 1e-08, 2: 1e-06, 3: 1e-05}[len(data_shape)]
    _interpolated(op_tester, data_shape, scales, "cubic", coordinate_transformation_mode)


def _check_resize_times_x(op_tester, data, scales, forward, **attributes):
    """Train Resize-11(data) * x; the data's gradient is the transposed Jacobian of
    `forward` (the resize, linear in the data) applied to upstream * x."""
    out_shape = [int(i * s) for i, s in zip(data.shape, scales, strict=True)]
    x_data = np.random.rand(*out_shape).astype(np.float32)

    def init_builder(builder):
        d = builder.addInputTensor(data)
        x = builder.addInputTensor(x_data)
        resized = _resize11(builder, d, scales, **attributes)
        o = builder.aiOnnx.mul([resized, x])
        builder.addOutputTensor(o)
        return [o, G + d, G + o]

    def reference(ref_data):
        upstream = ref_data.getOutputTensorGrad(0) * x_data
        grad = transposed_jacobian(forward, data.shape, upstream)
        return [forward(data) * x_data, grad.astype(np.float32), None]

    op_tester.setPatterns(["MulArgGradOp"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_resize_cubic_grad")
@pytest.mark.parametrize(
    "data_shape, scales",
    [([2, 2], [2.0, 3.0]), ([5, 3], [2.3, 2.5]), ([2, 8], [1.0, 3 / 8]), ([5, 4], [0.5, 0.5])],
)
def test_resize_cubic_grad(op_tester, data_shape, scales):
    data = np.random.rand(1, 1, *data_shape).astype(np.float32)
    scales = np.array([1.0, 1.0] + scales, np.float32)
    mode = {"coordinate_transformation_mode": "pytorch_half_pixel"}

    def bicubic(values):
        # torch's bicubic (align_corners False, A = -0.75, borders clamped) is ONNX's cubic
        # under pytorch_half_pixel.
        return onnx_interpolate(values, scales, "cubic", **mode)

    op_tester.atol = 1e-6
    _check_resize_times_x(op_tester, data, scales, bicubic, mode="cubic", **mode)


def _torch_linear(data, scales):
    """torch's (bi/tri)linear interpolate to size round(scale * size), align_corners False:
    source (i + 0.5) * in / out - 0.5, clamped at 0; the same as ONNX's linear under
    pytorch_half_pixel with the scales out / in."""
    sizes = np.round(np.multiply(scales, data.shape)).astype(int)
    exact = [o / i for i, o in zip(data.shape, sizes, strict=True)]
    return onnx_interpolate(
        data, exact, "linear", coordinate_transformation_mode="pytorch_half_pixel"
    )


def _torch_linear_case(op_tester, data_shape, scales):
    data = np.random.rand(*data_shape).astype(np.float32)
    scales = np.array(scales, np.float32)
    mode = {"coordinate_transformation_mode": "pytorch_half_pixel"}
    _infer(
        op_tester,
        data,
        lambda b, d: _resize11(b, d, scales, mode="linear", **mode),
        _torch_linear(data, scales),
    )


@pytest.mark.follows("test_resize_torch_linear")
@pytest.mark.parametrize(
    "data_shape, scales",
    [
        ([1, 1, 3], [1, 1, 2]),
        ([1, 1, 8], [1, 1, 1.5]),
        ([1, 1, 6], [1, 1, 5 / 6]),
        ([1, 1, 8], [1, 1, 3 / 4]),
        ([1, 1, 10], [1, 1, 0.7]),
    ],
)
def test_resize_torch_linear(op_tester, data_shape, scales):
    _torch_linear_case(op_tester, data_shape, scales)


@pytest.mark.follows("test_resize_torch_bilinear")
@pytest.mark.parametrize(
    "data_shape, scales",
    [
        ([1, 1, 5, 3], [1, 1, 2, 2]),
        ([1, 1, 2, 8], [1, 1, 3, 1.5]),
        ([1, 1, 5, 3], [1, 1, 1.6, 2]),
        ([1, 1, 4, 6], [1, 1, 0.5, 5 / 6]),
        ([1, 1, 5, 8], [1, 1, 0.2, 3 / 4]),
        ([1, 1, 7, 10], [1, 1, 4 / 7, 0.7]),
    ],
)
def test_resize_torch_bilinear(op_tester, data_shape, scales):
    op_tester.atol = 1e-6
    _torch_linear_case(op_tester, data_shape, scales)


@pytest.mark.follows("test_resize_torch_trilinear")
@pytest.mark.parametrize(
    "data_shape, scales",
    [
        ([1, 1, 4, 5, 3], [1, 1, 3, 2, 2]),
        ([1, 1, 8, 4, 6], [1, 1, 3 / 8, 0.5, 5 / 6]),
        ([1, 1, 6, 7, 10], [1, 1, 0.5, 4 / 7, 0.7]),
    ],
)
def test_resize_torch_trilinear(op_tester, data_shape, scales):
    op_tester.atol = 1e-6
    _torch_linear_case(op_tester, data_shape, scales)


@pytest.mark.follows("test_resize_with_both_scales_resize_param")
@pytest.mark.parametrize("scales_data, size_data", [([], [2, 2, 2, 2]), ([1.0, 1.0, 2.0, 3.0], [])])
def test_resize_with_both_scales_resize_param(op_tester, scales_data, size_data):
    # Both inputs named, one of them empty: the other one applies.
    data = np.random.rand(1, 3, 2, 2).astype(np.float32)
    scales = np.array(scales_data, np.float16)
    sizes = np.array(size_data, np.int64)
    factors = scales_data or [o / i for i, o in zip(data.shape, size_data, strict=True)]
    _infer(
        op_tester,
        data,
        lambda b, d: _resize11(b, d, scales, sizes),
        onnx_resize(data, factors),
    )


@pytest.mark.follows("test_resize_error_case")
def test_resize_error_case(op_tester):
    data = np.random.rand(4, 6).astype(np.float32)
    scales = np.array([1.0, 2.0], np.float16)
    sizes = np.array([1, 2], np.int64)

    def init_builder(builder):
        o = _resize11(builder, builder.addInputTensor(data), scales, sizes)
        builder.addOutputTensor(o)
        return [o]

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, lambda _: [], "infer")
    assert e_info.value.args[0] == (
        "Resize op has inputs for `sizes` and `scales`. Only one of these tensors should be "
        "present. If `sizes` is needed, please pass an empty string as the name of `scales` "
        "in the input list ( resize([X, roi, '', sizes]) ). If the proto is not generated "
        "from the PopART Builder, please confirm that only one of the two tensors shall have "
        "data."
    )
