"""TensorScatter (a KV-cache write) against onnx.reference, eagerly and under XLA."""

from __future__ import annotations

import numpy as np
import pytest
from single_node import reference, run_lowered, single_node_model

RNG = np.random.default_rng(9)


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis, shape", [(-2, (3, 2, 6, 4)), (1, (3, 6, 2)), (2, (3, 2, 6))])
@pytest.mark.parametrize("with_indices", [False, True])
def test_tensorscatter(mode, axis, shape, with_indices):
    past = RNG.normal(size=shape).astype(np.float32)
    update_shape = list(shape)
    update_shape[axis] = 3
    update = RNG.normal(size=update_shape).astype(np.float32)
    # linear writes must fit; circular ones wrap around
    starts = np.array([0, 2, 3] if mode == "linear" else [1, 4, 5], np.int64)
    inputs = {"past": past, "update": update, "write_indices": starts if with_indices else None}
    model = single_node_model("TensorScatter", inputs, opset=24, mode=mode, axis=axis)
    feeds = {name: value for name, value in inputs.items() if value is not None}
    (expected,) = reference(model, feeds)
    for compiled in (False, True):
        (actual,) = run_lowered(model, feeds, compiled=compiled)
        np.testing.assert_array_equal(actual, expected)
