"""graphcore/popart tests/integration/operators_test/scaledadd_test.py: ai.graphcore
ScaledAdd with scales as attributes and as tensors (Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_scaledadd_constant")
def test_scaledadd_constant(op_tester):
    d1, d2 = np.random.rand(2).astype(np.float32), np.random.rand(2).astype(np.float32)

    def init_builder(builder):
        i1, i2 = builder.addInputTensor(d1), builder.addInputTensor(d2)
        o = builder.aiGraphcore.scaledadd([i1, i2], scale0=0.5, scale1=0.8)
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["PreUniRepl", "MulArgGradOp"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [(0.5 * d1 + 0.8 * d2).astype(np.float32)])


@pytest.mark.follows("test_scaledadd_tensor")
def test_scaledadd_tensor(op_tester):
    d1, d2 = np.random.rand(2).astype(np.float32), np.random.rand(2).astype(np.float32)
    d3, d4 = np.random.rand(1).astype(np.float32), np.random.rand(1).astype(np.float32)

    def init_builder(builder):
        ids = [builder.addInputTensor(d) for d in (d1, d2, d3, d4)]
        o = builder.aiGraphcore.scaledadd(ids)
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["PreUniRepl", "MulArgGradOp"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [d3 * d1 + d4 * d2])
