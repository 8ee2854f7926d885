"""graphcore/popart tests/integration/operators_test/asinh_test.py: Asinh, in place, and its
gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

DATA = np.array(
    [-30.0, -20.12, -2.2, -1.5, -0.2, 0.0, 0.234, 1.0, 1.2, 2.0, 3.0, 10.0, 100.0, 2001.0],
    dtype=np.float32,
)


def _build(b, i):
    return b.aiOnnx.asinh([i])


@pytest.mark.follows("test_asinh")
def test_asinh(op_tester):
    op_tester.setPatterns(["DecomposeBinaryConstScalar"], enableRuntimeAsserts=False)
    check_unary(op_tester, DATA, _build, np.arcsinh, modes=("infer",))


@pytest.mark.follows("test_asinh_inplace")
def test_asinh_inplace(op_tester):
    check_unary(op_tester, DATA, _build, np.arcsinh, modes=("inplace",))


@pytest.mark.follows("test_asinh_grad")
def test_asinh_grad(op_tester):
    op_tester.setPatterns(
        ["SubtractArg1GradOp", "LogGradOp", "SqrtGradOp", "PowArg0GradOp"],
        enableRuntimeAsserts=False,
    )
    check_unary(
        op_tester, DATA[1:], _build, np.arcsinh, lambda x: 1 / np.sqrt(x**2 + 1), ("train",)
    )
