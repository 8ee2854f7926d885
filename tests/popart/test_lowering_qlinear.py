"""QLinearMatMul and QLinearConv against onnx.reference and onnxruntime, eagerly and under XLA."""

from __future__ import annotations

import numpy as np
import pytest
from single_node import onnxruntime_reference, reference, run_lowered, single_node_model

RNG = np.random.default_rng(3)
F32 = np.float32


def _quantized(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dtype)


def _check(model, feeds, expected):
    for compiled in (False, True):
        (actual,) = run_lowered(model, feeds, compiled=compiled)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("opset", [10, 21])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes", [((3, 5), (5, 4)), ((2, 3, 5), (5, 4))])
def test_qlinearmatmul(opset, dtype, shapes):
    a, b = _quantized(dtype, shapes[0]), _quantized(dtype, shapes[1])
    inputs = {
        "a": a,
        "a_scale": np.array(0.05, F32),
        "a_zero_point": np.array(3, dtype),
        "b": b,
        "b_scale": np.array(0.02, F32),
        "b_zero_point": np.array(-2 if dtype == np.int8 else 7, dtype),
        "y_scale": np.array(0.3, F32),
        "y_zero_point": np.array(5, dtype),
    }
    model = single_node_model("QLinearMatMul", inputs, set(inputs) - {"a", "b"}, opset=opset)
    feeds = {"a": a, "b": b}
    expected = reference(model, feeds)[0]
    np.testing.assert_array_equal(expected, onnxruntime_reference(model, feeds)[0])
    _check(model, feeds, expected)


@pytest.mark.parametrize(
    "attributes",
    [
        {},
        {"pads": [1, 1, 1, 1]},
        {"strides": [2, 1], "pads": [0, 1, 2, 1]},
        {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
        {"group": 2, "pads": [1, 0, 1, 0]},
    ],
)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_qlinearconv(attributes, per_channel, with_bias):
    group = attributes.get("group", 1)
    x = _quantized(np.uint8, (1, 4, 6, 5))
    # Weights within 7 bits: onnxruntime's x86 u8s8 kernels without VNNI add pairs of
    # uint8 x int8 products in saturating int16 (pmaddubsw), so full-range weights give
    # results that depend on the CPU's vector unit; within 7 bits no pair saturates.
    w = RNG.integers(-64, 64, size=(6, 4 // group, 3, 3)).astype(np.int8)
    inputs = {
        "x": x,
        "x_scale": np.array(0.04, F32),
        "x_zero_point": np.array(120, np.uint8),
        "w": w,
        "w_scale": (RNG.uniform(0.01, 0.05, 6) if per_channel else np.array(0.03)).astype(F32),
        "w_zero_point": np.array(0, np.int8),
        "y_scale": np.array(2.5, F32),
        "y_zero_point": np.array(100, np.uint8),
        "B": RNG.integers(-500, 500, 6).astype(np.int32) if with_bias else None,
    }
    model = single_node_model(
        "QLinearConv", inputs, set(inputs) - {"x", "w"}, opset=10, **attributes
    )
    feeds = {"x": x, "w": w}
    expected = onnxruntime_reference(model, feeds)[0]
    np.testing.assert_array_equal(expected, reference(model, feeds)[0])
    _check(model, feeds, expected)
