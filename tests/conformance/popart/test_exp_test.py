"""graphcore/popart tests/integration/operators_test/exp_test.py: Exp and Log chains with
in-place preferences either way (Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_logexp0")
def test_logexp0(op_tester):
    for priority in [-100.0, +100.0]:
        d1 = np.random.rand(4).astype(np.float32)

        def init_builder(builder, priority=priority, d1=d1):
            o0 = builder.aiOnnx.exp([builder.addInputTensor(d1)])
            builder.setInplacePreferences(o0, {"ExpInplace": priority})
            o2 = builder.aiOnnx.exp([builder.aiOnnx.log([o0])])
            builder.setInplacePreferences(o2, {"ExpInplace": priority})
            o3 = builder.aiOnnx.log([o2])
            builder.addOutputTensor(o3)
            return [o3]

        op_tester.rtol, op_tester.atol = 1e-5, 1e-6
        op_tester.run(init_builder, lambda _, d1=d1: [d1], "infer")


@pytest.mark.follows("test_exp0")
def test_exp0(op_tester):
    for priority in [-100.0, +100.0]:
        d1 = np.random.rand(4).astype(np.float32)

        def init_builder(builder, priority=priority, d1=d1):
            i1 = builder.addInputTensor(d1)
            outs = []
            for _ in range(3):
                outs.append(builder.aiOnnx.exp([i1]))
                builder.setInplacePreferences(outs[-1], {"ExpInplace": priority})
            return [builder.aiOnnx.sum(outs)]

        op_tester.run(init_builder, lambda _, d1=d1: [3 * np.exp(d1)], "infer")
