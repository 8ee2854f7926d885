"""graphcore/popart tests/integration/operators_test/prelu_test.py: PRelu with a full and a
broadcast slope (Cpu)."""

import numpy as np
import pytest


def _run(op_tester, slope_shape, fix_slope):
    data = np.random.uniform(-1, 1, [3, 4, 5]).astype(np.float32)
    slope = np.random.uniform(-1, 1, slope_shape).astype(np.float32)
    data[0, 0, 0], data[0, 0, 1] = -1.0, 1.0
    fix_slope(slope)

    def init_builder(builder):
        o = builder.aiOnnx.prelu([builder.addInputTensor(data), builder.addInputTensor(slope)])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [np.where(data > 0, data, data * slope)], "infer")


@pytest.mark.follows("test_prelu_basic")
def test_prelu_basic(op_tester):
    def fix(slope):
        slope[0, 0, 2], slope[0, 0, 3] = -0.5, 0.5

    _run(op_tester, [3, 4, 5], fix)


@pytest.mark.follows("test_prelu_broadcast")
def test_prelu_broadcast(op_tester):
    def fix(slope):
        slope[2], slope[3] = -0.5, 0.5

    _run(op_tester, [5], fix)
