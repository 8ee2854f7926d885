"""graphcore/popart tests/integration/operators_test/onehot_test.py: OneHot with a constant
depth of various types, on a given or the last axis, for 1-D and 2-D indices, and the
gradient of its values (Cpu)."""

import numpy as np
import pytest

import popart


def _onehot(indices, depth, values, axis):
    hot = np.arange(depth) == indices[..., np.newaxis]
    out = np.where(hot, values[1], values[0])
    return np.moveaxis(out, -1, axis)


def _run(op_tester, indices, depth, values, axis, train=False):
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(indices)
        i2 = builder.aiOnnx.constant(depth)  # depth has to be a constant
        i3 = builder.addInputTensor(values)
        o = builder.aiOnnx.onehot([i1, i2, i3], axis, "test_onehot")
        builder.addOutputTensor(o)
        return [o, g + o, g + i3] if train else [o]

    def reference(_):
        out = _onehot(indices, int(depth), values, axis).astype(values.dtype)
        if not train:
            return [out]
        # A summed loss: each value gets one per place it fills.
        on = indices.size
        return [out, np.ones_like(out), np.array([out.size - on, on], np.float32)]

    if train:
        op_tester.lossReduction = popart.ReductionType.Sum
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train" if train else "infer")


INDICES_1D = np.array([1, 5], np.int32)
INDICES_2D = np.array([[1, 2], [2, 1]], np.int32)


@pytest.mark.follows("test_onehot_2d_with_axis_testing")
def test_onehot_2d_with_axis_testing(op_tester):
    _run(op_tester, INDICES_1D, np.array(6, np.int32), np.array([0, 1], np.int32), 0)


@pytest.mark.follows("test_onehot_2d_without_axis_testing")
def test_onehot_2d_without_axis_testing(op_tester):
    values = np.random.rand(2).astype(np.float32)
    _run(op_tester, INDICES_1D, np.array(6, np.int64), values, -1)


@pytest.mark.follows("test_onehot_2d_with_axis_training")
def test_onehot_2d_with_axis_training(op_tester):
    values = np.array([-0.5, 0.5], np.float32)
    _run(op_tester, INDICES_1D, np.array(6, np.int16), values, 0, train=True)


@pytest.mark.follows("test_onehot_2d_without_axis_training")
def test_onehot_2d_without_axis_training(op_tester):
    values = np.array([-0.5, 0.5], np.float32)
    _run(op_tester, INDICES_1D, np.array(6, np.uint8), values, -1, train=True)


@pytest.mark.follows("test_onehot_3d_without_axis_testing")
def test_onehot_3d_without_axis_testing(op_tester):
    _run(op_tester, INDICES_2D, np.array(4, np.float32), np.array([0, 1], np.int32), -1)


@pytest.mark.follows("test_onehot_3d_with_axis_testing")
def test_onehot_3d_with_axis_testing(op_tester):
    _run(op_tester, INDICES_2D, np.array(4, np.int8), np.array([0, 1], np.int32), 1)
