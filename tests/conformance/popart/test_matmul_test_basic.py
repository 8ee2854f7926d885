"""graphcore/popart tests/integration/operators_test/matmul_test_basic.py: a 2-D MatMul
(Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_matmul_basic")
def test_matmul_basic(op_tester):
    d1 = np.random.rand(2, 3).astype(np.float32)
    d2 = np.random.rand(3, 4).astype(np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.matmul([builder.addInputTensor(d1), builder.addInputTensor(d2)])
        builder.addOutputTensor(o)
        return [o]

    op_tester.rtol, op_tester.atol = 1e-5, 1e-6
    op_tester.run(init_builder, lambda _: [np.matmul(d1, d2)])
