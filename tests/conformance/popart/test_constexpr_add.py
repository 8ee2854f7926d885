"""graphcore/popart tests/integration/operators_test/constexpr_add.py: an Add of two
Constants (folded at compile time by the original) feeding an Add of an input (Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_add_basic")
def test_add_basic(op_tester):
    d1 = np.asarray([1, 2, 3], dtype=np.float32)
    d2 = np.asarray([4, 5, 6], dtype=np.float32)
    dummy = np.zeros(3, np.float32)

    def init_builder(builder):
        cadd = builder.aiOnnx.add([builder.aiOnnx.constant(d1), builder.aiOnnx.constant(d2)])
        o = builder.aiOnnx.add([builder.addInputTensor(dummy), cadd])
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [d1 + d2 + dummy], "infer")
