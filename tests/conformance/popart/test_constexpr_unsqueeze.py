"""graphcore/popart tests/integration/operators_test/constexpr_unsqueeze.py: Unsqueeze of a
Constant (folded by the original) added to an input (Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_slice_basic")
def test_slice_basic(op_tester):
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    dummy = np.zeros((2, 3, 1, 4, 1), dtype=np.float32)

    def init_builder(builder):
        u = builder.aiOnnx.unsqueeze([builder.aiOnnx.constant(data)], axes=[2, 4])
        o = builder.aiOnnx.add([builder.addInputTensor(dummy), u])
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [data.reshape(2, 3, 1, 4, 1)], "infer")
