"""graphcore/popart tests/integration/operators_test/trig_test.py: Sin, Cos, Tan, Cosh and
Tanh, forward and gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

FUNCTIONS = {
    "sin": (np.sin, np.cos),
    "cos": (np.cos, lambda x: -np.sin(x)),
    "tan": (np.tan, lambda x: 1 / np.cos(x) ** 2),
    "cosh": (np.cosh, np.sinh),
    "tanh": (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
}


def _check(op_tester, name, mode):
    forward, derivative = FUNCTIONS[name]
    op_tester.rtol, op_tester.atol = 1e-5, 1e-7
    check_unary(
        op_tester,
        np.random.rand(4).astype(np.float32),
        lambda b, i: getattr(b.aiOnnx, name)([i]),
        lambda x: forward(x).astype(np.float32),
        derivative,
        modes=(mode,),
    )


@pytest.mark.follows("test_sin")
def test_sin(op_tester):
    _check(op_tester, "sin", "infer")


@pytest.mark.follows("test_sin_grad")
def test_sin_grad(op_tester):
    _check(op_tester, "sin", "train")


@pytest.mark.follows("test_cos")
def test_cos(op_tester):
    _check(op_tester, "cos", "infer")


@pytest.mark.follows("test_cos_grad")
def test_cos_grad(op_tester):
    _check(op_tester, "cos", "train")


@pytest.mark.follows("test_tan")
def test_tan(op_tester):
    _check(op_tester, "tan", "infer")


@pytest.mark.follows("test_tan_grad")
def test_tan_grad(op_tester):
    _check(op_tester, "tan", "train")


@pytest.mark.follows("test_cosh")
def test_cosh(op_tester):
    _check(op_tester, "cosh", "infer")


@pytest.mark.follows("test_cosh_grad")
def test_cosh_grad(op_tester):
    _check(op_tester, "cosh", "train")


@pytest.mark.follows("test_tanh")
def test_tanh(op_tester):
    _check(op_tester, "tanh", "infer")


@pytest.mark.follows("test_tanh_grad")
def test_tanh_grad(op_tester):
    _check(op_tester, "tanh", "train")
