"""graphcore/popart tests/integration/operators_test/shrink_test.py: Shrink as a hard and as
a soft shrink, forward and gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

DATA = np.linspace(-10, 10, 250, dtype=np.float32)
LAMBD = 1.5


def _hard(x):
    return np.where(np.abs(x) > LAMBD, x, 0).astype(np.float32)


def _soft(x):
    return np.where(x > LAMBD, x - LAMBD, np.where(x < -LAMBD, x + LAMBD, 0)).astype(np.float32)


def _mask(x):
    return (np.abs(x) > LAMBD).astype(np.float32)


def _hard_build(b, i):
    return b.aiOnnx.shrink([i], lambd=LAMBD)


def _soft_build(b, i):
    return b.aiOnnx.shrink([i], lambd=LAMBD, bias=LAMBD)


@pytest.mark.follows("test_hardshrink")
def test_hardshrink(op_tester):
    check_unary(op_tester, DATA, _hard_build, _hard, modes=("infer",))


@pytest.mark.follows("test_softshrink")
def test_softshrink(op_tester):
    check_unary(op_tester, DATA, _soft_build, _soft, modes=("infer",))


@pytest.mark.follows("test_hardshrink_training")
def test_hardshrink_training(op_tester):
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    check_unary(op_tester, DATA, _hard_build, _hard, _mask, modes=("train",))


@pytest.mark.follows("test_softshrink_training")
def test_softshrink_training(op_tester):
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    check_unary(op_tester, DATA, _soft_build, _soft, _mask, modes=("train",))
