"""graphcore/popart tests/integration/operators_test/elu_test.py: Elu forward, in place and
gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary


@pytest.mark.follows("test_elu")
def test_elu(op_tester):
    x = np.linspace(-5, 5, 250, dtype=np.float32)
    alpha = 2.0
    check_unary(
        op_tester,
        x,
        lambda b, i: b.aiOnnx.elu([i], alpha=alpha),
        lambda v: np.where(v > 0, v, alpha * (np.exp(v) - 1)).astype(np.float32),
        lambda v: np.where(v > 0, 1, alpha * np.exp(v)),
    )
