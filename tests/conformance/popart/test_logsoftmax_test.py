"""graphcore/popart tests/integration/operators_test/logsoftmax_test.py: LogSoftmax-10 over
the dims from `axis` on (coerced to 2-D), stable for large values, forward and gradient, in
place or not (Cpu)."""

import numpy as np
import pytest

import popart


def _as_2d(data, axis):
    axis = axis % data.ndim
    return data.reshape(int(np.prod(data.shape[:axis])), -1)


def _log_softmax(data, axis):
    flat = _as_2d(data, axis).astype(np.float64)
    shifted = flat - flat.max(axis=1, keepdims=True)
    out = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return out.reshape(data.shape).astype(np.float32)


def _log_softmax_grad(data, axis, upstream):
    g = _as_2d(upstream, axis).astype(np.float64)
    softmax = np.exp(_as_2d(_log_softmax(data, axis), axis).astype(np.float64))
    return (g - softmax * g.sum(axis=1, keepdims=True)).reshape(data.shape).astype(np.float32)


def _run(op_tester, data, axis=1, inplace=True, train=False):
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        o = builder.aiOnnx.logsoftmax([i1], axis=axis)
        builder.addOutputTensor(o)
        return [o, g + i1, g + o] if train else [o]

    def reference(ref_data):
        out = _log_softmax(data, axis)
        if not train:
            return [out]
        return [out, _log_softmax_grad(data, axis, ref_data.getOutputTensorGrad(0)), None]

    if train:
        op_tester.atol *= 10
        op_tester.rtol *= 10
    op_tester.setPatterns([], enableRuntimeAsserts=False)
    op_tester.inplacing = inplace
    op_tester.run(init_builder, reference, "train" if train else "infer")


LARGE = np.array([[0, 1, 2, 3], [10000, 10001, 10002, 10003]], dtype=np.float32)


def _positive_3d():
    np.random.seed(0)
    return np.abs(np.random.randn(3, 4, 5).astype(np.float32))


@pytest.mark.follows("test_logsoftmax")
@pytest.mark.parametrize("inplace", [True, False])
def test_logsoftmax(op_tester, inplace):
    _run(op_tester, np.random.rand(1, 4).astype(np.float32), inplace=inplace)


@pytest.mark.follows("test_logsoftmax_stability")
def test_logsoftmax_stability(op_tester):
    _run(op_tester, np.array([[10, 100, 1000]], dtype=np.float32))


@pytest.mark.follows("test_logsoftmax_negative_axis")
def test_logsoftmax_negative_axis(op_tester):
    _run(op_tester, np.random.rand(1, 4).astype(np.float32), axis=-1)


@pytest.mark.follows("test_logsoftmax_large_number")
def test_logsoftmax_large_number(op_tester):
    _run(op_tester, LARGE)


@pytest.mark.follows("test_logsoftmax_axis")
@pytest.mark.parametrize("axis", range(3))
def test_logsoftmax_axis(op_tester, axis):
    _run(op_tester, _positive_3d(), axis=axis)


@pytest.mark.follows("test_logsoftmax_grad")
@pytest.mark.parametrize("inplace", [True, False])
def test_logsoftmax_grad(op_tester, inplace):
    _run(op_tester, np.random.rand(1, 10).astype(np.float32), inplace=inplace, train=True)


@pytest.mark.follows("test_logsoftmax_grad_large_number")
def test_logsoftmax_grad_large_number(op_tester):
    _run(op_tester, LARGE, train=True)


@pytest.mark.follows("test_logsoftmax_grad_axis")
@pytest.mark.parametrize("axis", range(3))
def test_logsoftmax_grad_axis(op_tester, axis):
    _run(op_tester, _positive_3d(), axis=axis, train=True)
