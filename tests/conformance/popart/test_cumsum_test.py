"""graphcore/popart tests/integration/operators_test/cumsum_test.py: CumSum-11 along each
(also negative) axis of 1-D to 3-D data, exclusive and/or reversed, its gradient, and in
float16 (Cpu)."""

import numpy as np
import pytest

import popart

AXES_3D = [-3, -2, -1, 0, 1, 2]
X1 = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
X2 = np.arange(1, 7).astype(np.float32).reshape(2, 3)


def _cumsum(x, axis, exclusive=False, reverse=False):
    x = x.astype(np.float64)
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis)
    if exclusive:
        out = out - x
    return np.flip(out, axis) if reverse else out


def _run(op_tester, x, axis, exclusive=False, reverse=False, train=False):
    g = popart.reservedGradientPrefix()
    kwargs = {}
    if exclusive:
        kwargs["exclusive"] = 1
    if reverse:
        kwargs["reverse"] = 1

    def init_builder(builder):
        i0 = builder.addInputTensor(x)
        i1 = builder.aiOnnxOpset11.constant(np.array(axis, np.int32))
        o = builder.aiOnnxOpset11.cumsum([i0, i1], **kwargs)
        builder.addOutputTensor(o)
        return [o, g + i0, g + o] if train else [o]

    def reference(ref_data):
        out = _cumsum(x, axis, exclusive, reverse).astype(x.dtype)
        if not train:
            return [out]
        # Each input adds to the outputs after it: its gradient sums theirs, the other way.
        upstream = ref_data.getOutputTensorGrad(0)
        return [out, _cumsum(upstream, axis, exclusive, not reverse).astype(x.dtype), None]

    op_tester.run(init_builder, reference, "train" if train else "infer")


def _x3():
    return np.arange(60).astype(np.float32).reshape(3, 4, 5)


@pytest.mark.follows("test_cumsum_1d")
def test_cumsum_1d(op_tester):
    _run(op_tester, X1, 0)


@pytest.mark.follows("test_cumsum_1d_exclusive")
def test_cumsum_1d_exclusive(op_tester):
    np.testing.assert_array_equal(_cumsum(X1, 0, exclusive=True), [0.0, 1.0, 3.0, 6.0, 10.0])
    _run(op_tester, X1, 0, exclusive=True)


@pytest.mark.follows("test_cumsum_1d_reverse")
def test_cumsum_1d_reverse(op_tester):
    _run(op_tester, X1, 0, reverse=True)


@pytest.mark.follows("test_cumsum_1d_reverse_exclusive")
def test_cumsum_1d_reverse_exclusive(op_tester):
    expected = [14.0, 12.0, 9.0, 5.0, 0.0]
    np.testing.assert_array_equal(_cumsum(X1, 0, exclusive=True, reverse=True), expected)
    _run(op_tester, X1, 0, exclusive=True, reverse=True)


@pytest.mark.follows("test_cumsum_2d_axis_0")
def test_cumsum_2d_axis_0(op_tester):
    _run(op_tester, X2, 0)


@pytest.mark.follows("test_cumsum_2d_axis_1")
def test_cumsum_2d_axis_1(op_tester):
    _run(op_tester, X2, 1)


@pytest.mark.follows("test_cumsum_2d_negative_axis")
def test_cumsum_2d_negative_axis(op_tester):
    _run(op_tester, X2, -1)


@pytest.mark.follows("test_cumsum_3d")
def test_cumsum_3d(op_tester):
    # One row of the original's table: axis 2 of arange(60).reshape(3, 4, 5).
    np.testing.assert_array_equal(_cumsum(_x3(), 2)[0, 1], [5, 11, 18, 26, 35])
    for axis in AXES_3D:
        _run(op_tester, _x3(), axis)


@pytest.mark.follows("test_cumsum_3d_v2")
def test_cumsum_3d_v2(op_tester):
    for axis in AXES_3D:
        _run(op_tester, _x3(), axis)


@pytest.mark.follows("test_cumsum_3d_reverse")
def test_cumsum_3d_reverse(op_tester):
    np.testing.assert_array_equal(_cumsum(_x3(), 1, reverse=True)[0, 0], [30, 34, 38, 42, 46])
    for axis in AXES_3D:
        _run(op_tester, _x3(), axis, reverse=True)


@pytest.mark.follows("test_cumsum_3d_reverse_v2")
def test_cumsum_3d_reverse_v2(op_tester):
    for axis in AXES_3D:
        _run(op_tester, _x3(), axis, reverse=True)


@pytest.mark.follows("test_cumsum_3d_exclusive")
def test_cumsum_3d_exclusive(op_tester):
    for axis in AXES_3D:
        _run(op_tester, _x3(), axis, exclusive=True)


@pytest.mark.follows("test_cumsum_grad_1d")
def test_cumsum_grad_1d(op_tester):
    _run(op_tester, X1, 0, train=True)


@pytest.mark.follows("test_cumsum_grad_1d_reverse")
def test_cumsum_grad_1d_reverse(op_tester):
    _run(op_tester, X1, 0, reverse=True, train=True)


@pytest.mark.follows("test_cumsum_grad_2d_axis_0")
def test_cumsum_grad_2d_axis_0(op_tester):
    _run(op_tester, X2, 0, train=True)


@pytest.mark.follows("test_cumsum_grad_2d_axis_1")
def test_cumsum_grad_2d_axis_1(op_tester):
    _run(op_tester, X2, 1, train=True)


@pytest.mark.follows("test_cumsum_grad_2d_negative_axis")
def test_cumsum_grad_2d_negative_axis(op_tester):
    _run(op_tester, X2, -1, train=True)


@pytest.mark.follows("test_cumsum_grad_3d")
def test_cumsum_grad_3d(op_tester):
    for axis in AXES_3D:
        _run(op_tester, _x3(), axis, train=True)


@pytest.mark.follows("test_cumsum_grad_3d_reverse")
def test_cumsum_grad_3d_reverse(op_tester):
    for axis in AXES_3D:
        _run(op_tester, _x3(), axis, reverse=True, train=True)


@pytest.mark.follows("test_cumsum_1d_fp16")
def test_cumsum_1d_fp16(op_tester):
    _run(op_tester, X1.astype(np.float16), 0)


@pytest.mark.follows("test_cumsum_grad_1d_fp16")
def test_cumsum_grad_1d_fp16(op_tester):
    _run(op_tester, X1.astype(np.float16), 0, train=True)
