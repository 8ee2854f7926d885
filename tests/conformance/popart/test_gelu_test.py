"""graphcore/popart tests/integration/operators_test/gelu_test.py: ai.graphcore Gelu (the
tanh approximation PopLibs computes) forward, in place and trained, and its closeness to
the exact erf GELU (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary
from scipy.special import erf

DATA = np.linspace(-10, 10, 100, dtype=np.float32)


def _poplibs_gelu(x):
    x = x.astype(np.float64)
    return (0.5 * x * (1.0 + np.tanh(0.7978845608 * x + 0.035677408136172 * x**3))).astype(
        np.float32
    )


def _exact_gelu(x):
    x = x.astype(np.float64)
    return (0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))).astype(np.float32)


def _poplibs_gelu_derivative(x):
    x = x.astype(np.float64)
    inner = 0.7978845608 * x + 0.035677408136172 * x**3
    t = np.tanh(inner)
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (0.7978845608 + 3 * 0.035677408136172 * x**2)


def _exact_gelu_derivative(x):
    x = x.astype(np.float64)
    return 0.5 * (1 + erf(x / np.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


def _build(b, i):
    return b.aiGraphcore.gelu([i])


@pytest.mark.follows("test_gelu")
def test_gelu(op_tester):
    op_tester.atol = 1e-6
    check_unary(op_tester, DATA, _build, _poplibs_gelu, modes=("infer",))


@pytest.mark.follows("test_gelu_inplace")
def test_gelu_inplace(op_tester):
    op_tester.atol = 1e-6
    check_unary(op_tester, DATA, _build, _poplibs_gelu, modes=("inplace",))


@pytest.mark.follows("test_gelu_torch")
def test_gelu_torch(op_tester):
    # The approximation stays within 1e-3 of torch's (exact, erf) GELU.
    op_tester.atol = 1e-3
    check_unary(op_tester, DATA, _build, _exact_gelu, modes=("inplace",))


@pytest.mark.follows("test_gelu_training")
def test_gelu_training(op_tester):
    op_tester.atol = 1e-5
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    check_unary(
        op_tester, DATA[None], _build, _poplibs_gelu, _poplibs_gelu_derivative, modes=("train",)
    )


@pytest.mark.follows("test_gelu_torch_training")
def test_gelu_torch_training(op_tester):
    op_tester.atol = 1e-3
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    check_unary(
        op_tester, DATA[None], _build, _exact_gelu, _exact_gelu_derivative, modes=("train",)
    )
