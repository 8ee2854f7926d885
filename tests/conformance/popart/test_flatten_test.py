"""graphcore/popart tests/integration/operators_test/flatten_test.py: Flatten at axis 0 and a
negative axis, and its gradient (Cpu)."""

import numpy as np
import pytest

import popart


def _infer(op_tester, d1, axis, expected):
    def init_builder(builder):
        o = builder.aiOnnx.flatten([builder.addInputTensor(d1)], axis=axis)
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns([], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [expected], "infer")


@pytest.mark.follows("test_flatten")
def test_flatten(op_tester):
    d1 = np.random.rand(2, 1, 3, 4, 1).astype(np.float32)
    _infer(op_tester, d1, 0, d1.reshape(1, -1))


@pytest.mark.follows("test_flatten_negative")
def test_flatten_negative(op_tester):
    d1 = np.random.rand(2, 1, 3, 4, 5).astype(np.float32)
    _infer(op_tester, d1, -2, d1.reshape(6, 20))


@pytest.mark.follows("test_flatten_grad")
def test_flatten_grad(op_tester):
    d1 = np.random.rand(2, 1, 3, 4, 1).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = builder.aiOnnx.flatten([i1], axis=0)
        builder.addOutputTensor(o)
        return [o, g + i1, g + o]

    def reference(ref_data):
        return [d1.reshape(1, -1), ref_data.getOutputTensorGrad(0).reshape(d1.shape), None]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")
