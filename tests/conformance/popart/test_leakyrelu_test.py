"""graphcore/popart tests/integration/operators_test/leakyrelu_test.py: LeakyRelu with the
default and given alphas, in place or not, forward and gradient in float32 and float16
(Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

DEFAULT_ALPHA = 0.01


def _build(alpha):
    def build(b, i):
        return b.aiOnnx.leakyrelu([i]) if alpha is None else b.aiOnnx.leakyrelu([i], alpha=alpha)

    return build


def _run(op_tester, alpha, inplace, dtype, mode):
    x = np.linspace(-10, 10, 100, dtype=dtype)
    slope = DEFAULT_ALPHA if alpha is None else alpha
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    op_tester.inplacing = inplace
    if dtype == np.float16:
        op_tester.rtol = 1e-2
    check_unary(
        op_tester,
        x,
        _build(alpha),
        lambda v: np.where(v > 0, v, v * np.asarray(slope, dtype)).astype(dtype),
        lambda v: np.where(v > 0, 1, slope),
        modes=(mode,),
    )


@pytest.mark.follows("test_lrelu_inf")
@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("alpha", [None, 0.02, 1.5])
def test_lrelu_inf(op_tester, inplace, alpha):
    # The original runs each case twice, against torch and numpy; both give these values.
    _run(op_tester, alpha, inplace, np.float32, "infer")


@pytest.mark.follows("test_lrelu_train")
@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("alpha", [None, 0.02, 1.5])
def test_lrelu_train(op_tester, alpha, inplace):
    _run(op_tester, alpha, inplace, np.float32, "train")


@pytest.mark.follows("test_lrelu_train16")
@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("alpha", [None, 0.02, 1.5])
def test_lrelu_train16(op_tester, alpha, inplace):
    _run(op_tester, alpha, inplace, np.float16, "train")
