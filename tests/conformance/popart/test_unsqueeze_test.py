"""graphcore/popart tests/integration/operators_test/unsqueeze_test.py: Unsqueeze and its
gradient (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_unsqueeze")
def test_unsqueeze(op_tester):
    d1 = np.random.rand(2, 3, 4).astype(np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.unsqueeze([builder.addInputTensor(d1)], axes=[1])
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns([], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [np.expand_dims(d1, 1)], "infer")


@pytest.mark.follows("test_unsqueeze_grad")
def test_unsqueeze_grad(op_tester):
    d1 = np.random.rand(2, 3, 4).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = builder.aiOnnx.unsqueeze([i1], axes=[1])
        builder.addOutputTensor(o)
        return [o, g + i1, g + o]

    def reference(ref_data):
        return [np.expand_dims(d1, 1), ref_data.getOutputTensorGrad(0).reshape(d1.shape), None]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")
