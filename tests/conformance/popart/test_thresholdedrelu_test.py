"""graphcore/popart tests/integration/operators_test/thresholdedrelu_test.py:
ThresholdedRelu forward, in place and gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary


@pytest.mark.follows("test_thresholdedrelu")
def test_thresholdedrelu(op_tester):
    x = np.linspace(-10, 10, 250, dtype=np.float32)
    alpha = 2.0
    check_unary(
        op_tester,
        x,
        lambda b, i: b.aiOnnx.thresholdedrelu([i], alpha=alpha),
        lambda v: np.where(v > alpha, v, 0).astype(np.float32),
        lambda v: (v > alpha).astype(np.float32),
    )
