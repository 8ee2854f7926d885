"""graphcore/popart tests/integration/operators_test/scatter_test.py: Scatter (opset 9) on
either axis with its gradients (scattered-over data gets none, updates get all), and indices
smaller than the updates (Cpu)."""

import numpy as np
import pytest

import popart


def _scatter(op_tester, data, indices, updates, axis, expected, d_data):
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        i2 = builder.addInputTensor(indices)
        i3 = builder.addInputTensor(updates)
        o = builder.aiOnnx.scatter([i1, i2, i3], axis)
        builder.addOutputTensor(o)
        return [o, g + i1, g + i3]

    op_tester.lossReduction = popart.ReductionType.Sum
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [expected, d_data, np.ones_like(updates)], "train")


def _scatter_numpy(data, indices, updates, axis):
    """ONNX Scatter: out[.., indices[i, j], ..] = updates[i, j] along `axis`, over the
    positions of `indices` (which may be smaller than `updates`)."""
    out = data.copy()
    for position in np.ndindex(*indices.shape):
        target = list(position)
        target[axis] = indices[position]
        out[tuple(target)] = updates[position]
    return out


ZEROS = np.zeros((3, 3), np.float32)
INDICES = np.array([[1, 0, 2], [0, 2, 1]], np.int32)
UPDATES = np.array([[-1.0, -1.1, -1.2], [2.0, 2.1, 2.2]], np.float32)


@pytest.mark.follows("test_scatter_0")
def test_scatter_0(op_tester):
    expected = np.array([[2.0, -1.1, 0.0], [-1.0, 0.0, 2.2], [0.0, 2.1, -1.2]], np.float32)
    np.testing.assert_array_equal(_scatter_numpy(ZEROS, INDICES, UPDATES, 0), expected)
    d_data = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], np.float32)
    _scatter(op_tester, ZEROS, INDICES, UPDATES, 0, expected, d_data)


@pytest.mark.follows("test_scatter_1")
def test_scatter_1(op_tester):
    data = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)
    indices = np.array([[1, 3]], np.int32)
    updates = np.array([[-1.1, 2.1]], np.float32)
    expected = np.array([[1.0, -1.1, 3.0, 2.1, 5.0]], np.float32)
    d_data = np.array([[1.0, 0, 1.0, 0, 1.0]], np.float32)
    _scatter(op_tester, data, indices, updates, 1, expected, d_data)


@pytest.mark.follows("test_scatter_2")
def test_scatter_2(op_tester):
    expected = np.array([[-1.1, -1, -1.2], [2, 2.2, 2.1], [0.0, 0.0, 0.0]], np.float32)
    np.testing.assert_array_equal(_scatter_numpy(ZEROS, INDICES, UPDATES, 1), expected)
    d_data = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], np.float32)
    _scatter(op_tester, ZEROS, INDICES, UPDATES, 1, expected, d_data)


@pytest.mark.follows("test_scatter_3")
def test_scatter_3(op_tester):
    updates = np.arange(1, 11, dtype=np.float32).reshape(2, 5)
    data = np.zeros((3, 5), np.float32)
    indices = np.array([[0, 1, 2, 0]], np.uint32)

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        i2 = builder.addInputTensor(indices)
        i3 = builder.addInputTensor(updates)
        o = builder.aiOnnx.scatter([i1, i2, i3], 0)
        builder.addOutputTensor(o)
        return [o]

    op_tester.lossReduction = popart.ReductionType.Sum
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [_scatter_numpy(data, indices, updates, 0)], "train")
