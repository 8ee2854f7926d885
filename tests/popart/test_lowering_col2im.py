"""Col2Im against onnx.reference and onnxruntime, eagerly and under XLA."""

from __future__ import annotations

import math

import numpy as np
import pytest
from single_node import onnxruntime_reference, reference, run_lowered, single_node_model


@pytest.mark.parametrize(
    "image, block, attributes",
    [
        ([5, 5], [2, 2], {}),
        ([6, 5], [3, 2], {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
        ([7, 6], [2, 3], {"dilations": [2, 1], "pads": [0, 1, 2, 1], "strides": [1, 2]}),
        ([4, 3, 5], [2, 2, 2], {"strides": [1, 1, 2]}),
    ],
)
def test_col2im(image, block, attributes):
    rank = len(image)
    strides = attributes.get("strides", [1] * rank)
    dilations = attributes.get("dilations", [1] * rank)
    pads = attributes.get("pads", [0] * 2 * rank)
    counts = [
        (image[d] + pads[d] + pads[d + rank] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
        for d in range(rank)
    ]
    x = np.random.default_rng(4).normal(size=(2, 3 * math.prod(block), math.prod(counts)))
    x = x.astype(np.float32)
    inputs = {
        "x": x,
        "image_shape": np.array(image, np.int64),
        "block_shape": np.array(block, np.int64),
    }
    model = single_node_model(
        "Col2Im", inputs, {"image_shape", "block_shape"}, opset=18, **attributes
    )
    (expected,) = reference(model, {"x": x})
    if rank == 2:  # compared with onnxruntime on images only
        np.testing.assert_allclose(
            onnxruntime_reference(model, {"x": x})[0], expected, rtol=1e-5, atol=1e-5
        )
    for compiled in (False, True):
        (actual,) = run_lowered(model, {"x": x}, compiled=compiled)
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
