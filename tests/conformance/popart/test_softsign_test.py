"""graphcore/popart tests/integration/operators_test/softsign_test.py: Softsign and its
gradient over the whole float32 range (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

F32 = np.finfo(np.float32)
# Spaced in float64: numpy 2's float32 linspace overflows on max - min.
DATA = np.linspace(float(F32.min), float(F32.max), num=250).astype(np.float32)


def _softsign(x):
    return (x / (1 + np.abs(x.astype(np.float64)))).astype(np.float32)


@pytest.mark.follows("test_softsign")
def test_softsign(op_tester):
    check_unary(op_tester, DATA, lambda b, i: b.aiOnnx.softsign([i]), _softsign, modes=("infer",))


@pytest.mark.follows("test_softsign_grad")
def test_softsign_grad(op_tester):
    check_unary(
        op_tester,
        DATA,
        lambda b, i: b.aiOnnx.softsign([i]),
        _softsign,
        lambda x: 1 / np.square(1 + np.abs(x.astype(np.float64))),
        modes=("train",),
    )
