"""Resize and Upsample against onnx.reference (and onnxruntime for Resize-10 and Upsample),
eagerly and compiled by XLA."""

from __future__ import annotations

import numpy as np
import pytest
from single_node import onnxruntime_reference, reference, run_lowered, single_node_model

from openipu._src.popart.errors import popart_exception

RNG = np.random.default_rng(7)
X = RNG.normal(size=(1, 2, 5, 7)).astype(np.float32)
F32 = np.float32

# (mode, attributes, scales or None, sizes or None)
CASES = [
    ("nearest", {"nearest_mode": "round_prefer_floor"}, [1, 1, 1.6, 0.6], None),
    (
        "nearest",
        {"nearest_mode": "round_prefer_ceil", "coordinate_transformation_mode": "asymmetric"},
        [1, 1, 2.0, 1.5],
        None,
    ),
    (
        "nearest",
        {"nearest_mode": "floor", "coordinate_transformation_mode": "align_corners"},
        None,
        [1, 2, 9, 4],
    ),
    (
        "nearest",
        {"nearest_mode": "ceil", "coordinate_transformation_mode": "pytorch_half_pixel"},
        None,
        [1, 2, 3, 11],
    ),
    ("nearest", {"coordinate_transformation_mode": "half_pixel_symmetric"}, [1, 1, 0.7, 1.3], None),
    ("linear", {}, [1, 1, 0.6, 1.7], None),
    ("linear", {"coordinate_transformation_mode": "align_corners"}, None, [1, 2, 8, 3]),
    ("linear", {"coordinate_transformation_mode": "pytorch_half_pixel"}, None, [1, 2, 1, 4]),
    ("linear", {"coordinate_transformation_mode": "half_pixel_symmetric"}, [1, 1, 0.7, 1.3], None),
    ("linear", {"antialias": 1}, [1, 1, 0.4, 0.6], None),
    ("linear", {"antialias": 1, "exclude_outside": 1}, None, [1, 2, 2, 3]),
    ("cubic", {}, [1, 1, 1.5, 0.8], None),
    ("cubic", {"cubic_coeff_a": -0.5, "exclude_outside": 1}, [1, 1, 0.8, 2.2], None),
    ("cubic", {"coordinate_transformation_mode": "asymmetric"}, None, [1, 2, 10, 5]),
    ("cubic", {"antialias": 1, "cubic_coeff_a": -0.5}, [1, 1, 0.5, 0.35], None),
    ("cubic", {"antialias": 1, "exclude_outside": 1}, None, [1, 2, 3, 4]),
]


def _check(model, feeds, expected, atol=1e-5):
    for compiled in (False, True):
        (actual,) = run_lowered(model, feeds, compiled=compiled)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("opset", [13, 19])
@pytest.mark.parametrize("mode, attributes, scales, sizes", CASES)
def test_resize_modes_against_onnx_reference(opset, mode, attributes, scales, sizes):
    if opset < 18 and (
        "antialias" in attributes
        or attributes.get("coordinate_transformation_mode") == "half_pixel_symmetric"
    ):
        pytest.skip("attribute or mode of Resize-18/19")
    inputs = {
        "x": X,
        "roi": None,
        "scales": None if scales is None else np.array(scales, F32),
        "sizes": None if sizes is None else np.array(sizes, np.int64),
    }
    model = single_node_model(
        "Resize", inputs, {"scales", "sizes"}, opset=opset, mode=mode, **attributes
    )
    _check(model, {"x": X}, reference(model, {"x": X})[0])


@pytest.mark.parametrize("extrapolation", [0.0, -3.5])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize_with_roi_and_axes(mode, extrapolation):
    roi = np.array([0.3, -0.2, 0.9, 1.3], F32)  # starts then ends, for axes 3 and 2
    inputs = {"x": X, "roi": roi, "scales": None, "sizes": np.array([6, 4], np.int64)}
    model = single_node_model(
        "Resize",
        inputs,
        {"roi", "sizes"},
        mode=mode,
        axes=[3, 2],
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=extrapolation,
    )
    _check(model, {"x": X}, reference(model, {"x": X})[0])


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_keep_aspect_ratio_policy(policy):
    inputs = {"x": X, "roi": None, "scales": None, "sizes": np.array([7, 7], np.int64)}
    model = single_node_model(
        "Resize", inputs, {"sizes"}, mode="linear", axes=[2, 3], keep_aspect_ratio_policy=policy
    )
    _check(model, {"x": X}, reference(model, {"x": X})[0])


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float64])
def test_resize_other_dtypes_round_and_saturate(dtype):
    x = (RNG.uniform(0, 255, size=(1, 1, 4, 4))).astype(dtype)
    inputs = {"x": x, "roi": None, "scales": np.array([1, 1, 1.5, 0.75], F32), "sizes": None}
    model = single_node_model("Resize", inputs, {"scales"}, mode="cubic", opset=13)
    _check(model, {"x": x}, reference(model, {"x": x})[0], atol=1e-4)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_10_and_upsample_against_onnxruntime(mode):
    x = RNG.normal(size=(1, 1, 3, 4)).astype(F32)
    scales = np.array([1, 1, 2.0, 1.5], F32)
    ops = [("Upsample", 9)] if mode == "linear" else [("Resize", 10), ("Upsample", 9)]
    for op_type, opset in ops:
        model = single_node_model(
            op_type, {"x": x, "scales": scales}, {"scales"}, opset=opset, mode=mode
        )
        _check(model, {"x": x}, onnxruntime_reference(model, {"x": x})[0])


def test_resize_10_linear_samples_at_half_pixels_as_popart():
    # PopART reads coordinate_transformation_mode on Resize-10 too, half_pixel by default
    # (willow/src/op/resize.cpp), where ONNX's Resize-10 is asymmetric.
    x = RNG.normal(size=(1, 1, 3, 4)).astype(F32)
    scales = np.array([1, 1, 2.0, 1.5], F32)
    model = single_node_model(
        "Resize", {"x": x, "scales": scales}, {"scales"}, opset=10, mode="linear"
    )
    as_11 = single_node_model(
        "Resize",
        {"x": x, "roi": np.zeros(0, F32), "scales": scales},
        {"roi", "scales"},
        opset=11,
        mode="linear",
    )
    _check(model, {"x": x}, reference(as_11, {"x": x})[0])


def test_resize_needs_constant_scales_and_valid_attributes():
    inputs = {"x": X, "roi": None, "scales": np.array([1, 1, 2, 2], F32)}
    streamed = single_node_model("Resize", inputs, mode="linear")
    with pytest.raises(popart_exception, match="'scales' must be a constant"):
        # traced (as a session traces): the streamed scales have no value yet
        run_lowered(streamed, {"x": X, "scales": inputs["scales"]}, compiled=True)
    with pytest.raises(popart_exception, match="antialias"):
        run_lowered(
            single_node_model("Resize", inputs, {"scales"}, mode="nearest", antialias=1), {"x": X}
        )
    both = {**inputs, "sizes": np.array([1, 2, 3, 3], np.int64)}
    with pytest.raises(popart_exception, match="Only one of these tensors should be present"):
        run_lowered(single_node_model("Resize", both, {"scales", "sizes"}), {"x": X})


def test_upsample_7_takes_its_scales_as_an_attribute():
    x = RNG.normal(size=(1, 1, 3, 4)).astype(F32)
    model = single_node_model("Upsample", {"x": x}, opset=7, mode="nearest", scales=[1, 1, 2, 3])
    _check(model, {"x": x}, np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))


@pytest.mark.parametrize(
    "mode, coordinates",
    [("nearest", "tf_half_pixel_for_nn"), ("linear", "half_pixel"), ("cubic", "align_corners")],
)
def test_resize_11_against_onnxruntime(mode, coordinates):
    x = RNG.normal(size=(1, 2, 4, 5)).astype(F32)
    inputs = {"x": x, "roi": np.zeros(0, F32), "scales": np.array([1, 1, 1.5, 0.8], F32)}
    model = single_node_model(
        "Resize",
        inputs,
        {"roi", "scales"},
        opset=11,
        mode=mode,
        coordinate_transformation_mode=coordinates,
    )
    _check(model, {"x": x}, onnxruntime_reference(model, {"x": x})[0])


@pytest.mark.parametrize("opset", [16, 20])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_gridsample_against_onnx_reference(opset, mode, padding_mode, align_corners):
    x = RNG.normal(size=(2, 2, 4, 5)).astype(F32)
    grid = RNG.uniform(-1.6, 1.6, size=(2, 3, 4, 2)).astype(F32)  # some past the borders
    grid[0, 0, 0] = [0.25, -0.5]  # exactly between pixels
    feeds = {"x": x, "grid": grid}
    attributes = {"padding_mode": padding_mode, "align_corners": align_corners}

    def model(version, name):
        return single_node_model("GridSample", feeds, opset=version, mode=name, **attributes)

    # onnx.reference knows GridSample-20's mode names only: GridSample-16 (bilinear,
    # bicubic) computes the same.
    (expected,) = reference(model(20, mode), feeds)
    old_name = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    lowered = model(opset, mode if opset == 20 else old_name)
    if not (mode == "cubic" and padding_mode == "border"):  # onnxruntime differs there
        (other,) = onnxruntime_reference(lowered, feeds)
        np.testing.assert_allclose(other, expected, rtol=1e-5, atol=1e-5)
    for compiled in (False, True):
        (actual,) = run_lowered(lowered, feeds, compiled=compiled)
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_gridsample_volumetric(mode):
    x = RNG.normal(size=(1, 2, 3, 4, 3)).astype(F32)
    grid = RNG.uniform(-1.2, 1.2, size=(1, 2, 2, 3, 3)).astype(F32)
    model = single_node_model("GridSample", {"x": x, "grid": grid}, opset=20, mode=mode)
    (expected,) = reference(model, {"x": x, "grid": grid})
    (actual,) = run_lowered(model, {"x": x, "grid": grid}, compiled=True)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
