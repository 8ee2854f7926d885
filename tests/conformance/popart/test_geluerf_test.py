"""graphcore/popart tests/integration/operators_test/geluerf_test.py: ai.graphcore GeluErf
(the exact, erf-based GELU), in place, and its gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary
from scipy.special import erf

DATA = np.linspace(-10, 10, 100, dtype=np.float32)


def _gelu(x):
    return (0.5 * x * (1 + erf(x.astype(np.float64) / np.sqrt(2)))).astype(np.float32)


def _derivative(x):
    x = x.astype(np.float64)
    return 0.5 * (1 + erf(x / np.sqrt(2))) + x * np.exp(-0.5 * x**2) / np.sqrt(2 * np.pi)


def _build(b, i):
    return b.aiGraphcore.geluerf([i])


@pytest.mark.follows("test_geluerf")
def test_geluerf(op_tester):
    op_tester.atol = 1e-6
    check_unary(op_tester, DATA, _build, _gelu, modes=("infer",))


@pytest.mark.follows("test_geluerf_inplace")
def test_geluerf_inplace(op_tester):
    op_tester.atol = 1e-6
    check_unary(op_tester, DATA, _build, _gelu, modes=("inplace",))


@pytest.mark.follows("test_geluerf_training")
def test_geluerf_training(op_tester):
    op_tester.atol = 1e-5
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    check_unary(op_tester, DATA.reshape(1, -1), _build, _gelu, _derivative, modes=("train",))
