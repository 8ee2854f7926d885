"""ai.onnx.ml LabelEncoder against onnx.reference and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper
from single_node import onnxruntime_reference, reference, run_lowered, single_node_model

from openipu._src.popart.lowering import lower_model


def _decoded(array):
    if array.dtype == object:
        return np.vectorize(lambda item: item.decode("utf-8"), otypes=[object])(array)
    return array


CASES = [
    # version, input, attributes
    (
        2,
        np.array([1, 5, 7, 1], np.int64),
        {"keys_int64s": [1, 7], "values_floats": [0.5, -2.0], "default_float": 9.0},
    ),
    (2, np.array(["a", "c", "b"], object), {"keys_strings": ["a", "b"], "values_int64s": [3, 4]}),
    (
        2,
        np.array([[0.5, 1.5]], np.float32),
        {"keys_floats": [1.5], "values_strings": ["x"], "default_string": "?"},
    ),
    (
        4,
        np.array([2, 3, 9], np.int64),
        {
            "keys_tensor": numpy_helper.from_array(np.array([2, 9], np.int64)),
            "values_tensor": numpy_helper.from_array(np.array([20, 90], np.int64)),
            "default_tensor": numpy_helper.from_array(np.array([-1], np.int64)),
        },
    ),
]


def _encoder(version, x, attributes):
    return single_node_model(
        "LabelEncoder",
        {"x": x},
        opset=18,
        domain="ai.onnx.ml",
        domain_version=version,
        **attributes,
    )


@pytest.mark.parametrize("version, x, attributes", CASES)
def test_labelencoder(version, x, attributes):
    model = _encoder(version, x, attributes)
    expected = reference(model, {"x": x})[0]
    np.testing.assert_array_equal(onnxruntime_reference(model, {"x": x})[0], expected)
    compiled = (False, True) if lower_model(model).compilable else (False,)
    for each in compiled:
        (actual,) = run_lowered(model, {"x": x}, compiled=each)
        assert actual.shape == expected.shape
        assert _decoded(actual).tolist() == expected.tolist()


def test_labelencoder_compiles_numbers_only():
    assert lower_model(_encoder(*CASES[0])).compilable
    assert not lower_model(_encoder(*CASES[1])).compilable
