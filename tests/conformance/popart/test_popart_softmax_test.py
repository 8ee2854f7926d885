"""graphcore/popart tests/integration/operators_test/softmax_test.py: Softmax (opset 10: the
dims from `axis` on, coerced to 2-D), forward and gradient, at rank 1 and 3 (Cpu)."""

import numpy as np
import pytest

import popart


def _softmax(data, axis):
    flat = data.reshape(int(np.prod(data.shape[:axis])), -1).astype(np.float64)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(data.shape).astype(np.float32)


def _softmax_vjp(data, axis, upstream):
    s = _softmax(data, axis).reshape(int(np.prod(data.shape[:axis])), -1).astype(np.float64)
    g = upstream.reshape(s.shape).astype(np.float64)
    return (s * (g - (g * s).sum(axis=1, keepdims=True))).reshape(data.shape).astype(np.float32)


def _infer(op_tester, data, axis):
    def init_builder(builder):
        o = builder.aiOnnx.softmax([builder.addInputTensor(data)], axis)
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [_softmax(data, axis)])


def _grad(op_tester, data, axis):
    # The original picks out one element of the softmax by a one-hot mask.
    one_place = np.zeros(data.size, np.float32)
    one_place[int(np.random.rand() * data.size)] = 1.0
    one_place = one_place.reshape(data.shape)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1, i2 = builder.addInputTensor(data), builder.addInputTensor(one_place)
        s = builder.aiOnnx.softmax([i1], axis)
        o = builder.aiOnnx.mul([s, i2])
        builder.addOutputTensor(o)
        return [o, s, g + i1, g + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        s = _softmax(data, axis)
        return [s * one_place, s, _softmax_vjp(data, axis, d__o * one_place), None]

    op_tester.setPatterns(["PreUniRepl", "MulArgGradOp"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_softmax")
def test_softmax(op_tester):
    _infer(op_tester, np.random.rand(1, 4).astype(np.float32), 1)


@pytest.mark.follows("test_softmax_grad")
def test_softmax_grad(op_tester):
    data = np.random.rand(1, 4).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        o = builder.aiOnnx.softmax([i1])
        builder.addOutputTensor(o)
        return [o, g + i1, g + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        return [_softmax(data, 1), _softmax_vjp(data, 1, d__o), None]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_softmax_rank1_axis0")
def test_softmax_rank1_axis0(op_tester):
    _infer(op_tester, np.random.rand(5).astype(np.float32), 0)


@pytest.mark.follows("test_softmax_rank1_axis0_grad")
def test_softmax_rank1_axis0_grad(op_tester):
    _grad(op_tester, np.random.rand(5).astype(np.float32), 0)


@pytest.mark.follows("test_softmax_rank3_axis0")
def test_softmax_rank3_axis0(op_tester):
    _infer(op_tester, np.random.rand(3, 4, 5).astype(np.float32), 0)


@pytest.mark.follows("test_softmax_rank3_axis0_grad")
def test_softmax_rank3_axis0_grad(op_tester):
    _grad(op_tester, np.random.rand(3, 4, 5).astype(np.float32), 0)


@pytest.mark.follows("test_softmax_rank3_axis1")
def test_softmax_rank3_axis1(op_tester):
    _infer(op_tester, np.random.rand(3, 4, 5).astype(np.float32), 1)


@pytest.mark.follows("test_softmax_rank3_axis1_grad")
def test_softmax_rank3_axis1_grad(op_tester):
    _grad(op_tester, np.random.rand(3, 4, 5).astype(np.float32), 1)


@pytest.mark.follows("test_softmax_rank3_axis2")
def test_softmax_rank3_axis2(op_tester):
    _infer(op_tester, np.random.rand(3, 4, 5).astype(np.float32), 2)


@pytest.mark.follows("test_softmax_rank3_axis2_grad")
def test_softmax_rank3_axis2_grad(op_tester):
    _grad(op_tester, np.random.rand(3, 4, 5).astype(np.float32), 2)
