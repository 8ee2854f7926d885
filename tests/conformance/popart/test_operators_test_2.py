"""graphcore/popart tests/integration/operators_test/operators_test_2.py (the second half of
operators_test.py): ArgMin/ArgMax (keepdims, negative axes), Ceil, Floor and Round (forward,
in place, zero gradients, ai.graphcore Round), Clip-6 and Clip-11 (missing min or max, float16
data with a float32 bound), InstanceNormalization's gradients (4-D and 5-D), ConstantOfShape,
Concat, ConvTranspose (1-D to 3-D, strides, pads, output padding, groups, output_shape,
auto_pad, gradients), Where (broadcasting, in place, gradients) and the ai.graphcore bitwise
ops, against numpy and stock TensorFlow (Cpu)."""

from __future__ import annotations

import numpy as np
import pytest
from popart_onnx_reference import numeric_gradients
from popart_op_checks import unbroadcast

import popart

G = popart.reservedGradientPrefix()


def _run_single(op_tester, data, add_op, expected, opsets=None):
    """Infer `add_op(builder, input)` on `data` and compare with `expected`."""

    def init_builder(builder):
        o = add_op(builder, builder.addInputTensor(data))
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [expected], "infer", opsets=opsets)


# ---------------------------------------------------------------- ArgMin / ArgMax


def _arg_reduce(op_tester, name, data, axis, keepdims, opsets=None):
    function = np.argmin if name == "argmin" else np.argmax
    expected = function(data, axis=axis)
    if keepdims:
        expected = np.expand_dims(expected, axis)
    _run_single(
        op_tester,
        data,
        lambda b, i: getattr(b.aiOnnx, name)([i], axis, keepdims, f"test_{name}"),
        expected.astype(np.int32),
        opsets,
    )


def _rand4d():
    return np.random.rand(5, 7, 11, 13).astype(np.float32)


@pytest.mark.follows("test_argmin_no_keepdims")
def test_argmin_no_keepdims(op_tester):
    _arg_reduce(op_tester, "argmin", _rand4d(), 0, 0)


@pytest.mark.follows("test_argmin_keepdims")
def test_argmin_keepdims(op_tester):
    _arg_reduce(op_tester, "argmin", _rand4d(), 0, 1)


@pytest.mark.follows("test_argmin_negative_axis")
def test_argmin_negative_axis(op_tester):
    _arg_reduce(op_tester, "argmin", _rand4d(), -1, 1, {"ai.onnx": 11, "ai.graphcore": 1})


@pytest.mark.follows("test_argmax_2d")
@pytest.mark.parametrize(
    "opset, axis, keepdims",
    [(9, 0, 1), (9, 0, 0), (9, 1, 1), (9, 1, 0), (11, -1, 0), (11, -2, 0)],
)
def test_argmax_2d(op_tester, opset, axis, keepdims):
    data = np.random.rand(5, 6).astype(np.float32)
    opsets = {"ai.onnx": opset, "ai.graphcore": 1}
    _arg_reduce(op_tester, "argmax", data, axis, keepdims, opsets)


@pytest.mark.follows("test_argmax_no_keepdims")
def test_argmax_no_keepdims(op_tester):
    _arg_reduce(op_tester, "argmax", _rand4d(), 0, 0)


@pytest.mark.follows("test_argmax_keepdims")
def test_argmax_keepdims(op_tester):
    _arg_reduce(op_tester, "argmax", _rand4d(), 0, 1)


# ---------------------------------------------------------------- Ceil / Floor / Round


def _symmetric():
    return (np.random.rand(2, 7) * 6 - 3).astype(np.float32)


def _rounding_forward(op_tester, op, function, opset_namespace="aiOnnx"):
    data = _symmetric()
    _run_single(
        op_tester,
        data,
        lambda b, i: getattr(getattr(b, opset_namespace), op)([i], f"test_{op}"),
        function(data).astype(np.float32),
    )


def _rounding_inplace(op_tester, op, function, step_type="infer"):
    """log -> op -> exp: the op sits between two others, so it can be in-placed."""
    data = (np.random.rand(2, 7) * 10).astype(np.float32)

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        rounded = getattr(builder.aiOnnxOpset11, op)([builder.aiOnnxOpset11.log([i1])])
        o = builder.aiOnnxOpset11.exp([rounded])
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["InPlace"], enableRuntimeAsserts=False)
    op_tester.run(
        init_builder, lambda _: [np.exp(function(np.log(data))).astype(np.float32)], step_type
    )


def _rounding_grad(op_tester, op, function):
    """Rounding is piecewise constant: its gradient is zero everywhere."""
    data = _symmetric()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        o = getattr(builder.aiOnnxOpset11, op)([i1])
        builder.addOutputTensor(o)
        return [o, G + i1]

    op_tester.run(
        init_builder, lambda _: [function(data).astype(np.float32), np.zeros_like(data)], "train"
    )


@pytest.mark.follows("test_ceil")
def test_ceil(op_tester):
    _rounding_forward(op_tester, "ceil", np.ceil)


@pytest.mark.follows("test_ceil_inplace")
def test_ceil_inplace(op_tester):
    _rounding_inplace(op_tester, "ceil", np.ceil)


@pytest.mark.follows("test_ceil_grad")
def test_ceil_grad(op_tester):
    _rounding_grad(op_tester, "ceil", np.ceil)


@pytest.mark.follows("test_floor")
def test_floor(op_tester):
    _rounding_forward(op_tester, "floor", np.floor)


@pytest.mark.follows("test_floor_inplace")
def test_floor_inplace(op_tester):
    _rounding_inplace(op_tester, "floor", np.floor)


@pytest.mark.follows("test_floor_grad")
def test_floor_grad(op_tester):
    _rounding_grad(op_tester, "floor", np.floor)


@pytest.mark.follows("test_round")
def test_round(op_tester):
    _rounding_forward(op_tester, "round", np.round, "aiOnnxOpset11")


@pytest.mark.follows("test_round_graphcore")
def test_round_graphcore(op_tester):
    data = _symmetric()

    def add_round(builder, i1):
        o = builder.aiGraphcore.round([i1], "test_round")
        # The builder infers the output's shape.
        assert builder.getTensorShape(o) == [2, 7]
        return o

    op_tester.inplacing = False
    _run_single(op_tester, data, add_round, np.round(data))


@pytest.mark.follows("test_round_inplace")
def test_round_inplace(op_tester):
    _rounding_inplace(op_tester, "round", np.round, "train")


@pytest.mark.follows("test_round_grad")
def test_round_grad(op_tester):
    _rounding_grad(op_tester, "round", np.round)


# ---------------------------------------------------------------- Clip


@pytest.mark.follows("test_clip")
def test_clip(op_tester):
    data = _symmetric()
    _run_single(
        op_tester,
        data,
        lambda b, i: b.aiOnnx.clip([i], min=-1.5, max=1.5),
        np.clip(data, -1.5, 1.5),
    )


@pytest.mark.follows("test_clip_inplace")
def test_clip_inplace(op_tester):
    data = (np.random.rand(2, 7) * 10).astype(np.float32)

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        clipped = builder.aiOnnx.clip([builder.aiOnnx.log([i1])], min=4, max=7)
        o = builder.aiOnnx.exp([clipped])
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["InPlace"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [np.exp(np.clip(np.log(data), 4, 7))], "infer")


@pytest.mark.follows("test_clip_grad")
def test_clip_grad(op_tester):
    data = _symmetric()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        o = builder.aiOnnx.clip([i1], min=-1.5, max=1.5)
        builder.addOutputTensor(o)
        return [o, G + i1, G + o]

    def reference(ref_data):
        # The gradient passes where the input lies within [min, max].
        inside = (data >= -1.5) & (data <= 1.5)
        return [np.clip(data, -1.5, 1.5), ref_data.getOutputTensorGrad(0) * inside, None]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


def _clip11(op_tester, data, low, high, expected):
    """Clip-11 with its bounds as constant inputs; None leaves a bound out."""

    def add_clip(builder, i1):
        inputs = [i1]
        for bound in (low, high):
            inputs.append("" if bound is None else builder.aiOnnx.constant(bound, False))
        while inputs[-1] == "":
            inputs.pop()
        return builder.aiOnnx.clip(inputs)

    _run_single(op_tester, data, add_clip, expected, {"ai.onnx": 11, "ai.graphcore": 1})


@pytest.mark.follows("test_clip11")
def test_clip11(op_tester):
    data = _symmetric()
    low, high = np.array([-1.5], np.float32), np.array([1.5], np.float32)
    _clip11(op_tester, data, low, high, np.clip(data, -1.5, 1.5))


@pytest.mark.follows("test_clip11_default_min")
def test_clip11_default_min(op_tester):
    data = _symmetric()
    _clip11(op_tester, data, None, np.array([1.5], np.float32), np.minimum(data, 1.5))


@pytest.mark.follows("test_clip11_default_max")
def test_clip11_default_max(op_tester):
    data = _symmetric()
    _clip11(op_tester, data, np.array([-1.5], np.float32), None, np.maximum(data, -1.5))


@pytest.mark.follows("test_clip11_default_max_with_half")
def test_clip11_default_max_with_half(op_tester):
    # A float32 bound on float16 data: the bound is taken in the data's type (the original's
    # ClipOp reads it as a float and the output keeps the data's type).
    data = np.random.rand(2, 7).astype(np.float16)
    _clip11(op_tester, data, np.array([-1.5], np.float32), None, np.maximum(data, -1.5))


# ---------------------------------------------------------------- InstanceNormalization


def _instancenorm_grad(op_tester, spatial, non_zero_places):
    """InstanceNormalization(data) * mask (a few ones): the gradients of data, scale and bias
    against stock TensorFlow's of the same formula."""
    import tensorflow as tf

    features = 3
    data = np.random.rand(3, features, *spatial).astype(np.float32)
    mask = np.zeros(data.size, np.float32)
    mask[np.random.randint(0, data.size, non_zero_places)] = 1.0
    mask = mask.reshape(data.shape)
    scale = np.random.rand(features).astype(np.float32)
    bias = np.random.rand(features).astype(np.float32)
    epsilon = 1e-05

    def init_builder(builder):
        i_data = builder.addInputTensor(data)
        i_scale = builder.addInputTensor(scale)
        i_bias = builder.addInputTensor(bias)
        i_mask = builder.addInputTensor(mask)
        normed = builder.aiOnnx.instancenormalization([i_data, i_scale, i_bias], epsilon)
        out = builder.aiOnnx.mul([normed, i_mask])
        builder.addOutputTensor(out)
        return [out, normed, G + i_data, G + i_scale, G + i_bias, G + out]

    def reference(ref_data):
        axes = tuple(range(2, data.ndim))
        per_channel = (1, features) + (1,) * len(spatial)
        x, s, b = (tf.Variable(v) for v in (data, scale, bias))
        with tf.GradientTape() as tape:
            mean, variance = tf.nn.moments(x, axes=axes, keepdims=True)
            normed = (x - mean) / tf.sqrt(variance + epsilon) * tf.reshape(
                s, per_channel
            ) + tf.reshape(b, per_channel)
            out = normed * mask
        upstream = tf.constant(ref_data.getOutputTensorGrad(0))
        grads = tape.gradient(out, [x, s, b], output_gradients=upstream)
        return [out.numpy(), normed.numpy(), *(g.numpy() for g in grads), None]

    op_tester.setPatterns(
        ["PreUniRepl", "ReciprocalGradOp", "MulArgGradOp"], enableRuntimeAsserts=False
    )
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_instancenorm_grad")
def test_instancenorm_grad(op_tester):
    op_tester.atol = 1e-6
    _instancenorm_grad(op_tester, (4, 4), 5)


@pytest.mark.follows("test_instancenorm_grad_5D_input")
def test_instancenorm_grad_5D_input(op_tester):  # noqa: N802
    op_tester.atol = 1e-6
    _instancenorm_grad(op_tester, (4, 4, 4), 10)


# ---------------------------------------------------------------- ConstantOfShape / Concat


@pytest.mark.follows("test_constantofshape")
def test_constantofshape(op_tester):
    def init_builder(builder):
        shape = builder.aiOnnx.constant(np.array([1, 2, 3], np.int64))
        c = builder.aiOnnx.constantofshape([shape], np.array([3.1415], np.float32))
        o = builder.aiOnnx.identity([c])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [np.full((1, 2, 3), 3.1415, np.float32)], "infer")


@pytest.mark.follows("test_concat")
@pytest.mark.follows("test_concat_negative_axis")
@pytest.mark.parametrize("shape, axis", [((1, 2, 3), 1), ((1, 2, 2, 2), -1)])
def test_concat(op_tester, shape, axis):
    values = [np.random.rand(*shape).astype(np.float32) for _ in range(4)]

    def init_builder(builder):
        c = builder.aiOnnx.concat([builder.addInputTensor(v) for v in values], axis)
        o = builder.aiOnnx.identity([c])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [np.concatenate(values, axis)], "infer")


@pytest.mark.follows("test_constant_of_shape")
@pytest.mark.follows("test_constant_of_shape_int32")
@pytest.mark.parametrize("shape_dtype", [np.int64, np.int32])
def test_constant_of_shape(op_tester, shape_dtype):
    data = np.random.rand(2, 2).astype(np.float32)

    def add_op(builder, in0):
        shape = builder.aiOnnx.constant(np.array([2, 2], shape_dtype))
        c = builder.aiOnnx.constantofshape([shape], np.array([5], np.float32))
        return builder.aiOnnx.add([in0, c])

    _run_single(op_tester, data, add_op, data + np.float32(5))


# ---------------------------------------------------------------- ConvTranspose


def conv_transpose(x, w, bias=None, strides=None, pads=None, output_padding=None, group=1):
    """Transposed convolution by scattering (torch's ConvTranspose semantics): input position
    i adds x[i] * w[k] at output position i * stride + k; the full result is extended by
    output_padding at the end and `pads` is cut from both ends of each spatial axis."""
    n, c_in, *spatial = x.shape
    kernel = w.shape[2:]
    rank = len(spatial)
    strides = strides or [1] * rank
    pads = pads or [0] * rank
    output_padding = output_padding or [0] * rank
    c_out = w.shape[1] * group
    full = [
        (s - 1) * st + k + op
        for s, st, k, op in zip(spatial, strides, kernel, output_padding, strict=True)
    ]
    out = np.zeros((n, c_out, *full), np.float64)
    in_per_group = c_in // group
    out_per_group = c_out // group
    for ci in range(c_in):
        g = ci // in_per_group
        for co_local in range(out_per_group):
            co = g * out_per_group + co_local
            for position in np.ndindex(*spatial):
                for k in np.ndindex(*kernel):
                    target = tuple(
                        p * st + kk for p, st, kk in zip(position, strides, k, strict=True)
                    )
                    out[(slice(None), co, *target)] += (
                        x[(slice(None), ci, *position)] * w[(ci, co_local, *k)]
                    )
    crop = tuple(slice(p, f - p) for p, f in zip(pads, full, strict=True))
    out = out[(slice(None), slice(None), *crop)]
    if bias is not None:
        out = out + bias.reshape((1, c_out) + (1,) * rank)
    return out.astype(x.dtype)


def _convtranspose_infer(op_tester, x, w, expected, **attributes):
    def init_builder(builder):
        d, f = builder.addInputTensor(x), builder.addInputTensor(w)
        o = builder.aiOnnxOpset11.convtranspose([d, f], **attributes)
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["ConvTranspose"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [expected], step_type="infer")


@pytest.mark.follows("test_convtranspose")
def test_convtranspose(op_tester):
    # The example `convtranspose` of the ONNX operator documentation.
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.ones((1, 2, 3, 3), np.float32)
    plane = [
        [0.0, 1.0, 3.0, 3.0, 2.0],
        [3.0, 8.0, 15.0, 12.0, 7.0],
        [9.0, 21.0, 36.0, 27.0, 15.0],
        [9.0, 20.0, 33.0, 24.0, 13.0],
        [6.0, 13.0, 21.0, 15.0, 8.0],
    ]
    expected = np.array([[plane, plane]], np.float32)
    assert np.array_equal(conv_transpose(x, w), expected)
    _convtranspose_infer(op_tester, x, w, expected)


@pytest.mark.follows("test_convtranspose_1d")
def test_convtranspose_1d(op_tester):
    # The example `convtranspose_1d` of the ONNX operator documentation.
    x = np.array([[[0.0, 1.0, 2.0]]], np.float32)
    w = np.ones((1, 2, 3), np.float32)
    expected = np.array([[[0.0, 1.0, 3.0, 3.0, 2.0]] * 2], np.float32)
    assert np.array_equal(conv_transpose(x, w), expected)
    _convtranspose_infer(op_tester, x, w, expected)


@pytest.mark.follows("test_convtranspose_3d")
def test_convtranspose_3d(op_tester):
    # The example `convtranspose_3d` of the ONNX operator documentation; its first output
    # plane, from its table, checks the scatter reference.
    x = np.arange(60, dtype=np.float32).reshape(1, 1, 3, 4, 5)
    w = np.ones((1, 2, 3, 3, 3), np.float32)
    expected = conv_transpose(x, w)
    assert expected.shape == (1, 2, 5, 6, 7)
    np.testing.assert_array_equal(expected[0, 0, 0, 0], [0.0, 1.0, 3.0, 6.0, 9.0, 7.0, 4.0])
    np.testing.assert_array_equal(
        expected[0, 1, 2, 2], [225.0, 459.0, 702.0, 729.0, 756.0, 513.0, 261.0]
    )
    _convtranspose_infer(op_tester, x, w, expected)


@pytest.mark.follows("test_convtranspose_auto_pad")
def test_convtranspose_auto_pad(op_tester):
    # output_shape given: PopART works out the pads.
    x = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
    w = np.array([[[[1.0, 2.0], [2.0, 1.0]]]], np.float32)
    expected = np.array([[[[1.0, 4.0], [5.0, 15.0]]]], np.float32)
    _convtranspose_infer(op_tester, x, w, expected, output_shape=[2, 2])


@pytest.mark.follows("test_convtranspose_auto_pad_same_upper")
def test_convtranspose_auto_pad_same_upper(op_tester):
    # output_shape and auto_pad SAME_UPPER: the pads are cut at the start instead.
    x = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
    w = np.array([[[[1.0, 2.0], [2.0, 1.0]]]], np.float32)

    def init_builder(builder):
        d, f = builder.addInputTensor(x), builder.addInputTensor(w)
        o = builder.aiOnnxOpset11.convtranspose([d, f], output_shape=[2, 2])
        builder.addNodeAttribute("auto_pad", "SAME_UPPER", {o})
        builder.addOutputTensor(o)
        return [o]

    expected = np.array([[[[15.0, 10.0], [11.0, 4.0]]]], np.float32)
    op_tester.setPatterns(["ConvTranspose"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [expected], step_type="infer")


@pytest.mark.follows("test_convtranspose_grad")
@pytest.mark.parametrize("with_pattern", [True, False])
def test_convtranspose_grad(op_tester, with_pattern):
    x = np.random.randn(1, 1, 4, 4).astype(np.float32)
    w = (np.random.randn(1, 1, 2, 2) * 0.5).astype(np.float32)

    def init_builder(builder):
        d = builder.addInputTensor(x)
        f = builder.addInitializedInputTensor(w)
        o = builder.aiOnnxOpset11.convtranspose([d, f])
        two = builder.aiOnnxOpset11.constant(np.array([2.0], np.float32), False, "two")
        o_sq = builder.aiOnnxOpset11.pow([o, two])
        builder.addOutputTensor(o_sq)
        return [o_sq, G + d, G + f, G + o_sq]

    def reference(ref_data):
        upstream = ref_data.getOutputTensorGrad(0)
        dx, dw = numeric_gradients(
            lambda feeds: conv_transpose(feeds["x"], feeds["w"]) ** 2,
            {"x": x, "w": w},
            upstream,
            ["x", "w"],
        )
        return [conv_transpose(x, w) ** 2, dx, dw, None]

    patterns = ["ConvTranspose", "ConvFlipWeightsGradOp", "ConvDataGrad", "PowArg0GradOp"]
    patterns += ["SqrtGradOp"] + (["ConvFlipWeightsDoubleFlip"] if with_pattern else [])
    op_tester.atol = 1e-5
    op_tester.setPatterns(patterns, enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, step_type="train")


@pytest.mark.follows("test_convtranspose_pytorch")
@pytest.mark.parametrize(
    "in_chans, out_chans, data, kernel",
    [
        (1, 2, [3, 3], [3, 3]),
        (1, 2, [4, 4], [3, 3]),
        (1, 2, [5, 5], [4, 4]),
        (3, 6, [4, 4], [4, 4]),
        (1, 2, [5], [5]),
        (1, 2, [5], [3]),
        (2, 3, [3], [3]),
    ],
)
def test_convtranspose_pytorch(op_tester, in_chans, out_chans, data, kernel):
    x = np.random.rand(1, in_chans, *data).astype(np.float32)
    w = np.random.rand(in_chans, out_chans, *kernel).astype(np.float32)
    op_tester.atol = 1e-6
    _convtranspose_infer(op_tester, x, w, conv_transpose(x, w))


@pytest.mark.follows("test_convtranspose_pytorch_attributes")
@pytest.mark.parametrize(
    "in_chans, out_chans, data, kernel, attributes",
    [
        # strides
        (1, 2, [4], [4], {"stride": [5]}),
        (2, 3, [5], [4], {"stride": [5]}),
        (2, 3, [5, 5], [4, 4], {"stride": [3, 5]}),
        # output padding
        (1, 2, [4], [4], {"stride": [2], "output_padding": [1]}),
        # pads
        (1, 2, [3], [3], {"pads": [1]}),
        (1, 2, [5], [7], {"pads": [2]}),
        # deliberately excessive pads, with and without output_shape
        (1, 2, [5], [3], {"pads": [3]}),
        (1, 2, [9], [7], {"pads": [7], "outshape": True}),
        (1, 2, [11], [9], {"pads": [9]}),
        # strides, pads and output padding
        (1, 2, [3, 3], [3, 3], {"stride": [3, 2], "pads": [1, 2], "output_padding": [2, 1]}),
        # groups
        (4, 4, [3], [3], {"pads": [1], "groups": 4}),
        (8, 8, [5], [3], {"pads": [1], "groups": 2}),
        # output shape
        (8, 8, [5], [3], {"pads": [1], "outshape": True}),
    ],
)
def test_convtranspose_pytorch_attributes(op_tester, in_chans, out_chans, data, kernel, attributes):
    groups = attributes.get("groups", 1)
    x = np.random.rand(1, in_chans, *data).astype(np.float32)
    w = np.random.rand(in_chans, out_chans // groups, *kernel).astype(np.float32)
    bias = np.random.rand(out_chans).astype(np.float32)
    expected = conv_transpose(
        x,
        w,
        bias,
        attributes.get("stride"),
        attributes.get("pads"),
        attributes.get("output_padding"),
        groups,
    )

    def init_builder(builder):
        d, f = builder.addInputTensor(x), builder.addInputTensor(w)
        b = builder.addInitializedInputTensor(bias)
        kwargs = {"group": groups}
        if "stride" in attributes:
            kwargs["strides"] = attributes["stride"]
        if "output_padding" in attributes:
            kwargs["output_padding"] = attributes["output_padding"]
        if "pads" in attributes:
            kwargs["pads"] = attributes["pads"] * 2
        if attributes.get("outshape"):
            # As the original: the whole output shape torch gives.
            kwargs["output_shape"] = list(expected.shape)
        o = builder.aiOnnxOpset10.convtranspose([d, f, b], **kwargs)
        builder.addOutputTensor(o)
        return [o]

    op_tester.atol = 1e-5
    op_tester.setPatterns(popart.Patterns(popart.PatternsLevel.Default))
    op_tester.run(init_builder, lambda _: [expected], step_type="infer")


# ---------------------------------------------------------------- Where


def _where_cases():
    x2, y2 = np.ogrid[:3, :4]
    x2, y2 = np.float32(x2), np.float32(y2) + 10
    x4 = np.float32([[0, 1, 2], [0, 2, 4], [0, 3, 6]])
    return {
        0: (
            np.array([[1, 0], [1, 1]], bool),
            np.float32([[1, 2], [3, 4]]),
            np.float32([[9, 8], [7, 6]]),
        ),
        1: (np.array([[1, 0], [1, 1]], bool), np.float32([[1, 2]]), np.float32([[9, 8], [7, 6]])),
        2: (np.arange(9) < 5, np.arange(9, dtype=np.float32), 10 * np.arange(9, dtype=np.float32)),
        3: (x2 < y2, x2, y2),
        4: (x4 < 4, x4, np.float32([-1])),
        5: (np.array([False]), np.float32([[1, 2], [3, 4], [5, 6]]), np.float32([0, 10])),
    }


def _where_inputs(builder, condition, x, y):
    return [builder.addInputTensor(v) for v in (condition, x, y)]


@pytest.mark.follows("test_where_0")
@pytest.mark.follows("test_where_1")
@pytest.mark.follows("test_where_2")
@pytest.mark.follows("test_where_3")
@pytest.mark.follows("test_where_4")
@pytest.mark.follows("test_where_5")
@pytest.mark.parametrize("case", range(6))
def test_where(op_tester, case):
    condition, x, y = _where_cases()[case]
    if case == 2:
        # The original's test_where_2 selects between int32 tensors.
        x, y = x.astype(np.int32), y.astype(np.int32)

    def init_builder(builder):
        o = builder.aiOnnx.where(_where_inputs(builder, condition, x, y))
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [np.where(condition, x, y)], "infer")


@pytest.mark.follows("test_where_grad0")
@pytest.mark.follows("test_where_grad1")
@pytest.mark.follows("test_where_grad2")
@pytest.mark.follows("test_where_grad3")
@pytest.mark.follows("test_where_grad4")
@pytest.mark.follows("test_where_grad5")
@pytest.mark.parametrize("case", range(6))
def test_where_grad(op_tester, case):
    condition, x, y = _where_cases()[case]

    def init_builder(builder):
        i1, i2, i3 = _where_inputs(builder, condition, x, y)
        o = builder.aiOnnx.where([i1, i2, i3])
        builder.addOutputTensor(o)
        return [o, G + i2, G + i3, G + o]

    def reference(ref_data):
        # Each output element's gradient goes to the side the condition picked, summed back
        # over the broadcast axes.
        upstream = ref_data.getOutputTensorGrad(0)
        picked = np.broadcast_to(condition, upstream.shape)
        return [
            np.where(condition, x, y),
            unbroadcast(np.where(picked, upstream, 0), x.shape).astype(np.float32),
            unbroadcast(np.where(picked, 0, upstream), y.shape).astype(np.float32),
            None,
        ]

    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_where_inplace")
@pytest.mark.parametrize("side", ("lhs", "rhs"))
def test_where_inplace(op_tester, side):
    condition = np.random.rand(100, 200) > 0.5
    x = np.random.rand(100, 200).astype(np.float32)
    y = np.random.rand(100, 200).astype(np.float32)

    def init_builder(builder):
        i1, i2, i3 = _where_inputs(builder, condition, x, y)
        o = builder.aiOnnx.where([i1, i2, i3])
        builder.setInplacePreferences(
            o, {"WhereLhsInplace": float(side == "lhs"), "WhereRhsInplace": float(side == "rhs")}
        )
        builder.addOutputTensor(i2)
        builder.addOutputTensor(i3)
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["InPlace"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [np.where(condition, x, y)], "infer")


# ---------------------------------------------------------------- bitwise


@pytest.mark.follows("test_bitwise_not")
@pytest.mark.parametrize("np_type", [np.int32, np.uint32])
def test_bitwise_not(op_tester, np_type):
    data = np.random.uniform(-10, 10, 10).astype(np.int64).astype(np_type)

    def add_not(builder, i1):
        o = builder.aiGraphcore.bitwisenot([i1], "test_bitwisenot")
        assert builder.getTensorShape(o) == [10]
        return o

    _run_single(op_tester, data, add_not, np.bitwise_not(data))


@pytest.mark.follows("test_bitwise_binary_op")
@pytest.mark.parametrize("np_type", [np.int32, np.uint32])
@pytest.mark.parametrize("np_op", [np.bitwise_and, np.bitwise_or, np.bitwise_xor])
def test_bitwise_binary_op(op_tester, np_type, np_op):
    d1 = np.random.uniform(-10, 10, 10).astype(np.int64).astype(np_type)
    d2 = np.random.uniform(-10, 10, 10).astype(np.int64).astype(np_type)

    def init_builder(builder):
        op = getattr(builder.aiGraphcore, np_op.__name__.replace("_", ""))
        o = op([builder.addInputTensor(d1), builder.addInputTensor(d2)], "test_bitwise_binary_op")
        builder.addOutputTensor(o)
        assert builder.getTensorShape(o) == [10]
        return [o]

    op_tester.run(init_builder, lambda _: [np_op(d1, d2)], "infer")
