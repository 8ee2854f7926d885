"""graphcore/popart tests/integration/operators_test/boolean_test.py: And, Or, Not and Equal,
with and without broadcasting (Cpu)."""

import numpy as np
import pytest


def _binary(op_tester, name, d1, d2, expected):
    def init_builder(builder):
        o = getattr(builder.aiOnnx, name)([builder.addInputTensor(d1), builder.addInputTensor(d2)])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [expected], step_type="infer")


def _bools(*shape):
    return np.random.randn(*shape) > 0


@pytest.mark.follows("test_and")
def test_and(op_tester):
    d1, d2 = _bools(2), _bools(2)
    _binary(op_tester, "logical_and", d1, d2, d1 & d2)


@pytest.mark.follows("test_broadcast_and")
def test_broadcast_and(op_tester):
    d1, d2 = _bools(2, 2), _bools(2)
    _binary(op_tester, "logical_and", d1, d2, d1 & d2)


@pytest.mark.follows("test_or")
def test_or(op_tester):
    d1, d2 = _bools(2), _bools(2)
    _binary(op_tester, "logical_or", d1, d2, d1 | d2)


@pytest.mark.follows("test_broadcast_or")
def test_broadcast_or(op_tester):
    d1, d2 = _bools(2, 2), _bools(2)
    _binary(op_tester, "logical_or", d1, d2, d1 | d2)


@pytest.mark.follows("test_not")
def test_not(op_tester):
    d1 = _bools(2)

    def init_builder(builder):
        o = builder.aiOnnx.logical_not([builder.addInputTensor(d1)])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [~d1], step_type="infer")


@pytest.mark.follows("test_equal")
def test_equal(op_tester):
    d1, d2 = np.random.randn(2).astype(np.float32), np.random.randn(2).astype(np.float32)
    d2[0] = d1[0]
    _binary(op_tester, "equal", d1, d2, np.array([True, False]))


@pytest.mark.follows("test_broadcast_equal")
def test_broadcast_equal(op_tester):
    d1 = np.random.randn(2, 2).astype(np.float32)
    d2 = np.random.randn(2).astype(np.float32)
    d1[1, 0] = d2[0]
    _binary(op_tester, "equal", d1, d2, np.array([[False, False], [True, False]]))
