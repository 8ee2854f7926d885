"""graphcore/popart tests/integration/operators_test/selu_test.py: Selu forward, in place and
gradient with ONNX's default alpha and gamma (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

ALPHA = 1.67326319217681884765625
GAMMA = 1.05070102214813232421875


@pytest.mark.follows("test_selu")
def test_selu(op_tester):
    x = np.linspace(-5, 5, 250, dtype=np.float32)
    op_tester.rtol = 1e-5
    op_tester.atol = 1e-6
    check_unary(
        op_tester,
        x,
        lambda b, i: b.aiOnnx.selu([i]),
        lambda v: (GAMMA * np.where(v > 0, v, ALPHA * (np.exp(v) - 1))).astype(np.float32),
        lambda v: GAMMA * np.where(v > 0, 1, ALPHA * np.exp(v)),
    )
