"""Gradients as PopART gives them: zeros through ops whose gradient is zero (Ceil, Floor,
Round), none through integer tensors, Fmod/Mod's dividend gradient, and grouped
convolutions trained on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from training_helpers import one_training_step

import popart

GRADIENT = popart.reservedGradientPrefix()


def _gradients(build, x_value, w_value, anchored):
    """Train one step of sum|build(x * w)| and return the anchored gradients."""
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", list(x_value.shape))
    w = builder.addInitializedInputTensor(w_value)
    h = builder.aiOnnx.mul([x, w])
    loss = builder.aiGraphcore.l1loss([build(builder, h)], 1.0, reduction=popart.ReductionType.Sum)
    names = {"x": x, "w": w, "h": h}
    anchor_ids = [GRADIENT + names[name] for name in anchored]
    return one_training_step(builder.getModelProto(), loss, {x: x_value}, anchor_ids)[1]


X = np.array([1.3, -2.6, 0.4], np.float32)
W = np.array([1.0, 0.5, -2.0], np.float32)


@pytest.mark.parametrize(
    "op", [lambda b, h: b.aiOnnx.ceil([h]), lambda b, h: b.aiOnnx.floor([h]),
           lambda b, h: b.aiGraphcore.round([h])],
    ids=["ceil", "floor", "round"],
)  # fmt: skip
def test_gradient_through_a_one_way_op_is_zero(op):
    # willow/src/op/onewayunary.cpp: UnaryZeroGradOp.
    h_gradient, w_gradient = _gradients(op, X, W, ["h", "w"])
    np.testing.assert_array_equal(h_gradient, np.zeros(3))
    np.testing.assert_array_equal(w_gradient, np.zeros(3))


def test_gradient_through_a_float_cast_and_a_scale():
    def op(builder, h):
        half = builder.aiOnnx.cast([builder.aiGraphcore.scale([h], 3.0)], "FLOAT16")
        return builder.aiOnnx.cast([half], "FLOAT")

    (w_gradient,) = _gradients(op, X, W, ["w"])
    np.testing.assert_allclose(w_gradient, 3.0 * np.sign(X * W) * X, rtol=1e-3)


def test_no_gradient_through_an_integer_cast():
    def op(builder, h):
        return builder.aiOnnx.cast([builder.aiOnnx.cast([h], "INT32")], "FLOAT")

    with pytest.raises(popart.popart_exception, match="only through integer tensors"):
        _gradients(op, X, W, ["h"])


@pytest.mark.parametrize("kind", ["fmod", "mod"])
def test_remainder_gradient_is_the_dividends(kind):
    divisor = np.array([1.0, 1.0, 0.3], np.float32)

    def op(builder, h):
        d = builder.aiOnnx.constant(divisor)
        if kind == "fmod":
            return builder.aiGraphcore.fmod([h, d])
        return builder.aiOnnx.mod([h, d], 1)

    h_gradient, w_gradient = _gradients(op, X, W, ["h", "w"])
    # d|fmod(h, d)|/dh = sign(fmod(h, d)) (willow/src/op/fmod.cpp, FmodArg0GradOp).
    sign = np.sign(np.fmod(X * W, divisor))
    np.testing.assert_allclose(h_gradient, sign, rtol=1e-6)
    np.testing.assert_allclose(w_gradient, sign * X, rtol=1e-6)


def _grouped_conv_reference(x, w, groups):
    """y and d(sum|y|)/dw of a padded-by-1, stride-1 grouped convolution, in numpy."""
    padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    windows = sliding_window_view(padded, w.shape[2:], axis=(2, 3))  # n, c, h, w, kh, kw
    per_group_in, per_group_out = x.shape[1] // groups, w.shape[0] // groups
    outputs, gradients = [], []
    for g in range(groups):
        window = windows[:, g * per_group_in : (g + 1) * per_group_in]
        kernel = w[g * per_group_out : (g + 1) * per_group_out]
        outputs.append(np.einsum("nchwij,mcij->nmhw", window, kernel))
    y = np.concatenate(outputs, axis=1)
    for g in range(groups):
        window = windows[:, g * per_group_in : (g + 1) * per_group_in]
        sign = np.sign(y[:, g * per_group_out : (g + 1) * per_group_out])
        gradients.append(np.einsum("nchwij,nmhw->mcij", window, sign))
    return y, np.concatenate(gradients, axis=0)


def test_grouped_convolution_trains_on_the_cpu():
    rng = np.random.default_rng(0)
    x_value = rng.normal(size=(2, 4, 6, 6)).astype(np.float32)
    w_value = rng.normal(size=(6, 2, 3, 3)).astype(np.float32)
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 4, 6, 6])
    w = builder.addInitializedInputTensor(w_value)
    y = builder.aiOnnx.conv(
        [x, w], dilations=[1, 1], group=2, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]
    )
    loss = builder.aiGraphcore.l1loss([y], 1.0, reduction=popart.ReductionType.Sum)
    _, (result, gradient) = one_training_step(
        builder.getModelProto(), loss, {x: x_value}, [y, GRADIENT + w]
    )
    expected_y, expected_gradient = _grouped_conv_reference(x_value, w_value, groups=2)
    np.testing.assert_allclose(result, expected_y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-4, atol=1e-3)
