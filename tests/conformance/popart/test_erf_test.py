"""graphcore/popart tests/integration/operators_test/erf_test.py: Erf and its gradient
2/sqrt(pi) exp(-x^2), in float32 and float16, against scipy (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary
from scipy.special import erf

THREE = np.array([0.0, -1.0, 10.0])


def _build(b, i):
    return b.aiOnnx.erf([i])


def _erf_of(dtype):
    return lambda x: erf(x.astype(np.float64)).astype(dtype)


def _derivative(x):
    return 2.0 / np.sqrt(np.pi) * np.exp(-np.square(x.astype(np.float64)))


def _random():
    return np.random.randn(1, 3, 32, 32).astype(np.float32)


def _wide():
    return np.random.uniform(low=-10.0, high=20.3, size=(1, 2, 3, 20)).astype(np.float32)


def _check(op_tester, x, mode, atol=1e-5):
    op_tester.atol = atol
    check_unary(op_tester, x, _build, _erf_of(x.dtype), _derivative, modes=(mode,))


@pytest.mark.follows("test_erf_0")
def test_erf_0(op_tester):
    _check(op_tester, THREE.astype(np.float32), "infer")


@pytest.mark.follows("test_erf_0b")
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_erf_0b(op_tester, dtype):
    # The original's expected values, written out: erf(-1) = -0.84270079, erf(10) = 1.
    x = THREE.astype(dtype)

    def init_builder(builder):
        o = _build(builder, builder.addInputTensor(x))
        builder.addOutputTensor(o)
        return [o]

    op_tester.atol = 1e-3 if dtype == np.float16 else 1e-8
    op_tester.run(init_builder, lambda _: [np.array([0.0, -0.84270079, 1.0]).astype(dtype)])


@pytest.mark.follows("test_erf_1")
def test_erf_1(op_tester):
    _check(op_tester, _random(), "infer")


@pytest.mark.follows("test_erf_2")
def test_erf_2(op_tester):
    _check(op_tester, _wide(), "infer")


@pytest.mark.follows("test_erf_grad_0")
def test_erf_grad_0(op_tester):
    _check(op_tester, THREE.astype(np.float32), "train")


@pytest.mark.follows("test_erf_grad_0b")
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_erf_grad_0b(op_tester, dtype):
    _check(op_tester, THREE.astype(dtype), "train", atol=1e-3)


@pytest.mark.follows("test_erf_grad_1")
def test_erf_grad_1(op_tester):
    _check(op_tester, _random(), "train")


@pytest.mark.follows("test_erf_grad_2")
def test_erf_grad_2(op_tester):
    _check(op_tester, _wide(), "train")
