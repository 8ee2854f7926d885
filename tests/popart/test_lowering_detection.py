"""RoiAlign, MaxRoiPool and NonMaxSuppression against onnxruntime and onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from single_node import onnxruntime_reference, reference, run_lowered, single_node_model

from openipu._src.popart.errors import popart_exception

RNG = np.random.default_rng(11)
F32 = np.float32
X = RNG.normal(size=(2, 3, 9, 10)).astype(F32)
# x1, y1, x2, y2 (in image pixels; spatial_scale 0.5 maps them onto X), some past the border
ROIS = np.array(
    [[0, 0, 8, 8], [2.5, 3.2, 16.7, 11.1], [4, 4, 4.5, 4.2], [-3, 10, 25, 22], [10, 1, 19, 17]],
    F32,
)
BATCH = np.array([0, 1, 1, 0, 1], np.int64)


def _check(model, feeds, expected, compiled=(False, True), atol=1e-5):
    for each in compiled:
        (actual,) = run_lowered(model, feeds, compiled=each)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("opset", [10, 16])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("coordinates", ["half_pixel", "output_half_pixel"])
def test_roialign(opset, mode, sampling_ratio, coordinates):
    if opset == 10 and coordinates == "half_pixel":
        pytest.skip("RoiAlign-10 has output_half_pixel coordinates only")
    extra = {} if opset == 10 else {"coordinate_transformation_mode": coordinates}
    inputs = {"x": X, "rois": ROIS, "batch_indices": BATCH}
    model = single_node_model(
        "RoiAlign",
        inputs,
        {"rois", "batch_indices"},
        opset=opset,
        mode=mode,
        output_height=3,
        output_width=4,
        sampling_ratio=sampling_ratio,
        spatial_scale=0.5,
        **extra,
    )
    expected = onnxruntime_reference(model, {"x": X})[0]
    # onnxruntime and onnx.reference agree on avg from RoiAlign-16 (the reference reads
    # RoiAlign-10 with half_pixel coordinates, onnxruntime as the spec with output_half_pixel)
    if mode == "avg" and opset == 16:
        np.testing.assert_allclose(reference(model, {"x": X})[0], expected, rtol=1e-5, atol=1e-5)
    _check(model, {"x": X}, expected)


def test_roialign_streamed_rois_need_a_sampling_ratio():
    inputs = {"x": X, "rois": ROIS, "batch_indices": BATCH}
    fixed = single_node_model("RoiAlign", inputs, {"batch_indices"}, opset=16, sampling_ratio=2)
    feeds = {"x": X, "rois": ROIS}
    _check(fixed, feeds, onnxruntime_reference(fixed, feeds)[0], compiled=(True,))
    adaptive = single_node_model("RoiAlign", inputs, {"batch_indices"}, opset=16)
    with pytest.raises(popart_exception, match="sampling_ratio 0 .* needs constant rois"):
        run_lowered(adaptive, feeds, compiled=True)


@pytest.mark.parametrize("pooled_shape, spatial_scale", [([2, 2], 1.0), ([3, 4], 0.5)])
def test_maxroipool(pooled_shape, spatial_scale):
    rois = np.concatenate([BATCH[:, None].astype(F32), ROIS], axis=1)
    inputs = {"x": X, "rois": rois}
    model = single_node_model(
        "MaxRoiPool", inputs, opset=1, pooled_shape=pooled_shape, spatial_scale=spatial_scale
    )
    feeds = {"x": X, "rois": rois}
    _check(model, feeds, onnxruntime_reference(model, feeds)[0])


def _boxes(batches, count, center):
    corners = RNG.uniform(0, 10, size=(batches, count, 2))
    sizes = RNG.uniform(0.5, 4, size=(batches, count, 2))
    if center:
        return np.concatenate([corners, sizes], -1).astype(F32)
    boxes = np.concatenate([corners, corners + sizes], -1)
    flip = RNG.random((batches, count)) < 0.3  # the other diagonal
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes.astype(F32)


@pytest.mark.parametrize("opset", [10, 11])
@pytest.mark.parametrize("center_point_box", [0, 1])
@pytest.mark.parametrize(
    "max_boxes, iou, score", [(3, 0.5, None), (10, 0.3, 0.4), (0, 0.5, 0.0), (100, 0.0, None)]
)
def test_nonmaxsuppression(opset, center_point_box, max_boxes, iou, score):
    boxes = _boxes(2, 12, center_point_box)
    scores = RNG.random((2, 3, 12)).astype(F32)
    scores[0, 0, 5] = scores[0, 0, 6]  # a tie: box order decides
    inputs = {
        "boxes": boxes,
        "scores": scores,
        "max_output_boxes_per_class": np.array([max_boxes], np.int64),
        "iou_threshold": np.array([iou], F32),
        "score_threshold": None if score is None else np.array([score], F32),
    }
    model = single_node_model(
        "NonMaxSuppression",
        inputs,
        {"max_output_boxes_per_class", "iou_threshold", "score_threshold"},
        opset=opset,
        center_point_box=center_point_box,
    )
    feeds = {"boxes": boxes, "scores": scores}
    expected = onnxruntime_reference(model, feeds)[0]
    (actual,) = run_lowered(model, feeds)
    np.testing.assert_array_equal(actual, expected)


def test_nonmaxsuppression_does_not_compile_and_has_defaults():
    boxes, scores = _boxes(1, 5, 0), RNG.random((1, 1, 5)).astype(F32)
    model = single_node_model("NonMaxSuppression", {"boxes": boxes, "scores": scores})
    from openipu._src.popart.lowering import lower_model

    assert not lower_model(model).compilable
    (actual,) = run_lowered(model, {"boxes": boxes, "scores": scores})
    assert actual.shape == (0, 3)  # max_output_boxes_per_class defaults to 0
