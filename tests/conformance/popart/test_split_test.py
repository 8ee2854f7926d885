"""graphcore/popart tests/integration/operators_test/split_test.py: Split in halves, on a
negative axis, in given lengths (shapes known to the Builder), and its gradient (Cpu)."""

import numpy as np
import pytest

import popart


def _halves(op_tester, axis):
    data = np.random.rand(4, 4).astype(np.float32)

    def init_builder(builder):
        i = builder.addInputTensor(data)
        a, b = builder.aiOnnx.split([i], 2, axis) if axis else builder.aiOnnx.split([i], 2)
        if axis:
            assert builder.getTensorShape(a) == [4, 2]
            assert builder.getTensorShape(b) == [4, 2]
        o = builder.aiOnnx.sum([a, b])
        builder.addOutputTensor(o)
        return [o]

    halves = np.split(data, 2, axis or 0)
    op_tester.run(init_builder, lambda _: [halves[0] + halves[1]])


@pytest.mark.follows("test_split_basic")
def test_split_basic(op_tester):
    _halves(op_tester, None)


@pytest.mark.follows("test_split_negative_axis")
def test_split_negative_axis(op_tester):
    _halves(op_tester, -1)


@pytest.mark.follows("test_split_custom_lengths")
def test_split_custom_lengths(op_tester):
    data = np.random.rand(6).astype(np.float32)

    def init_builder(builder):
        a, b, c = builder.aiOnnx.split([builder.addInputTensor(data)], 3, 0, (1, 2, 3))
        for t, n in ((a, 1), (b, 2), (c, 3)):
            builder.addOutputTensor(t)
            assert builder.getTensorShape(t) == [n]
        return [a, b, c]

    op_tester.run(init_builder, lambda _: np.split(data, (1, 3)))


@pytest.mark.follows("test_split_grad")
def test_split_grad(op_tester):
    data = np.random.rand(4, 4).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i = builder.addInputTensor(data)
        a, b = builder.aiOnnx.split([i], 2)
        o = builder.aiOnnx.sum([a, b])
        builder.addOutputTensor(o)
        return [o, g + i, g + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        return [data[:2] + data[2:], np.concatenate([d__o, d__o]), None]

    op_tester.setPatterns(["SplitGradOpToConcat"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")
