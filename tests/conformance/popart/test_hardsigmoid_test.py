"""graphcore/popart tests/integration/operators_test/hardsigmoid_test.py: HardSigmoid
forward, in place and gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary


@pytest.mark.follows("test_hardsigmoid")
def test_hardsigmoid(op_tester):
    x = np.linspace(-1, 2, 250, dtype=np.float32)
    alpha, beta = 1.0, 0.5
    check_unary(
        op_tester,
        x,
        lambda b, i: b.aiOnnx.hardsigmoid([i], alpha=alpha, beta=beta),
        lambda v: np.clip(alpha * v + beta, 0, 1).astype(np.float32),
        lambda v: np.where((alpha * v + beta > 0) & (alpha * v + beta < 1), alpha, 0),
    )
