"""graphcore/popart tests/integration/operators_test/softplus_test.py: Softplus and its
gradient over the whole float32 range, saturating at both ends (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

F32 = np.finfo(np.float32)
# Spaced in float64: numpy 2's float32 linspace overflows on max - min.
DATA = np.linspace(float(F32.min), float(F32.max), num=250).astype(np.float32)


def _softplus(x):
    return np.logaddexp(0, x.astype(np.float64)).astype(np.float32)


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x.astype(np.float64)))


@pytest.mark.follows("test_softplus")
def test_softplus(op_tester):
    check_unary(op_tester, DATA, lambda b, i: b.aiOnnx.softplus([i]), _softplus, modes=("infer",))


@pytest.mark.follows("test_softplus_grad")
def test_softplus_grad(op_tester):
    check_unary(
        op_tester, DATA, lambda b, i: b.aiOnnx.softplus([i]), _softplus, _sigmoid, modes=("train",)
    )
