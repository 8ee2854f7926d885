"""graphcore/popart tests/integration/operators_test/matmul_test_grouped.py: ONNX MatMul of
operands with several (broadcast) group dimensions, against numpy's matmul (Cpu)."""

import numpy as np
import pytest

CASES = {
    "test_matmul_grouped_1": ((2, 1, 4, 5, 1, 7, 8), (2, 3, 1, 5, 6, 8, 9)),
    "test_matmul_grouped_2": ((2, 1, 4, 5, 1, 7, 8), (2, 3, 4, 5, 6, 8, 9)),
    "test_matmul_grouped_3": ((4, 5, 1, 7, 8), (2, 3, 1, 5, 6, 8, 9)),
    "test_matmul_grouped_4": ((2, 1, 4, 5, 1, 7, 8), (4, 5, 6, 8, 9)),
    "test_matmul_grouped_5": ((3, 3, 3), (3, 3, 4)),
}


def _grouped(op_tester, lhs_shape, rhs_shape):
    rng = np.random.default_rng(0)
    d1 = rng.random(lhs_shape, np.float32)
    d2 = rng.random(rhs_shape, np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.matmul([builder.addInputTensor(d1), builder.addInputTensor(d2)])
        builder.addOutputTensor(o)
        return [o]

    op_tester.rtol = 1e-5
    op_tester.atol = 1e-6
    op_tester.run(init_builder, lambda _: [np.matmul(d1, d2)])


@pytest.mark.follows("test_matmul_grouped_1")
def test_matmul_grouped_1(op_tester):
    _grouped(op_tester, *CASES["test_matmul_grouped_1"])


@pytest.mark.follows("test_matmul_grouped_2")
def test_matmul_grouped_2(op_tester):
    _grouped(op_tester, *CASES["test_matmul_grouped_2"])


@pytest.mark.follows("test_matmul_grouped_3")
def test_matmul_grouped_3(op_tester):
    _grouped(op_tester, *CASES["test_matmul_grouped_3"])


@pytest.mark.follows("test_matmul_grouped_4")
def test_matmul_grouped_4(op_tester):
    _grouped(op_tester, *CASES["test_matmul_grouped_4"])


@pytest.mark.follows("test_matmul_grouped_5")
def test_matmul_grouped_5(op_tester):
    _grouped(op_tester, *CASES["test_matmul_grouped_5"])
