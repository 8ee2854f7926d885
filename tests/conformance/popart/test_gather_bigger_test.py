"""graphcore/popart tests/integration/operators_test/gather_bigger_test.py: Gather of two rows
along axis 1 of a [20, 68000, 20] tensor (Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_gather_bigger")
def test_gather_bigger(op_tester):
    d1 = np.random.rand(20, 68000, 20).astype(np.float32)
    d2 = np.array([0, 1]).astype(np.int32)

    def init_builder(builder):
        i1, i2 = builder.addInputTensor(d1), builder.addInputTensor(d2)
        o = builder.aiOnnx.gather([i1, i2], 1)
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.options.opxAliasChecking = False
    op_tester.options.opxModifyChecking = False
    op_tester.run(init_builder, lambda _: [np.take(d1, d2, axis=1)], "infer")
