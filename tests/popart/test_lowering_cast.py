"""BitCast against numpy's view of the same bytes, eagerly and under XLA."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from single_node import run_lowered, single_node_model

from openipu._src.popart.errors import popart_exception

VALUES = np.array([[1.5, -0.0, np.inf], [np.nan, 3e-41, -7.25]])


@pytest.mark.parametrize(
    "source, target",
    [
        (np.float32, np.int32),
        (np.int32, np.float32),
        (np.float64, np.uint64),
        (np.float16, np.int16),
        (np.uint8, np.int8),
        (np.int64, np.float64),
        (np.uint32, np.int32),
    ],
)
def test_bitcast_reads_the_same_bytes(source, target):
    x = VALUES.astype(source) if np.dtype(source).kind == "f" else np.arange(-3, 3).astype(source)
    to = helper.np_dtype_to_tensor_dtype(np.dtype(target))
    model = single_node_model("BitCast", {"x": x}, opset=26, to=to)
    for compiled in (False, True):
        (actual,) = run_lowered(model, {"x": x}, compiled=compiled)
        assert actual.dtype == target
        np.testing.assert_array_equal(actual.view(np.uint8), x.view(np.uint8))


def test_bitcast_of_bools_and_of_other_widths():
    flags = np.array([True, False, True])
    model = single_node_model(
        "BitCast", {"x": flags}, opset=26, to=helper.np_dtype_to_tensor_dtype(np.dtype(np.uint8))
    )
    np.testing.assert_array_equal(run_lowered(model, {"x": flags})[0], flags.view(np.uint8))
    x = np.ones(3, np.float32)
    wide = single_node_model(
        "BitCast", {"x": x}, opset=26, to=helper.np_dtype_to_tensor_dtype(np.dtype(np.int64))
    )
    with pytest.raises(popart_exception, match=r"BitCast.*float32 and int64 differ in width"):
        run_lowered(wide, {"x": x})
