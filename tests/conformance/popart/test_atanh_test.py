"""graphcore/popart tests/integration/operators_test/atanh_test.py: Atanh, in place, and its
gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

DATA = np.array([-0.9, -0.77, -0.5, -0.23, -0.1, 0.0, 0.1, 0.23, 0.5, 0.77, 0.9], dtype=np.float32)


def _build(b, i):
    return b.aiOnnx.atanh([i])


@pytest.mark.follows("test_atanh")
def test_atanh(op_tester):
    op_tester.setPatterns(["DecomposeBinaryConstScalar"], enableRuntimeAsserts=False)
    check_unary(op_tester, DATA, _build, np.arctanh, modes=("infer",))


@pytest.mark.follows("test_atanh_inplace")
def test_atanh_inplace(op_tester):
    check_unary(op_tester, DATA, _build, np.arctanh, modes=("inplace",))


@pytest.mark.follows("test_atanh_grad")
def test_atanh_grad(op_tester):
    op_tester.setPatterns(
        ["SubtractArg1GradOp", "DivArg0GradOp", "DivArg1GradOp", "LogGradOp", "MulArgGradOp"],
        enableRuntimeAsserts=False,
    )
    check_unary(op_tester, DATA, _build, np.arctanh, lambda x: 1 / (1 - x**2), ("train",))
