"""graphcore/popart tests/integration/operators_test/log1p_test.py: ai.graphcore Log1p
(log(1 + x)) over small, huge and invalid (nan, -inf) inputs, in place or not with either
in-place preference, and its gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

SMALL = np.array([0.01, 0.1, 0.5, 1, 2, 12345], dtype=np.float32)
HUGE = np.linspace(0, 1e9, 100, dtype=np.float32)
INVALID = np.array([-10000.1, -123.1, -2.0, -1.55, -1.0, 10.0], dtype=np.float32)
MIXED = np.array(
    [-0.99, -0.5, 0.01, 0.1, 0.333, 0.5, 0.789, 1, 2, 8.8, 1212.1, 12345.6], dtype=np.float32
)


def _build(b, i):
    return b.aiGraphcore.log1p([i])


def _log1p(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log1p(x.astype(np.float64)).astype(np.float32)


def _derivative(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 / (1 + x.astype(np.float64))


@pytest.mark.follows("test_log1p_0")
def test_log1p_0(op_tester):
    check_unary(op_tester, SMALL, _build, _log1p, modes=("infer",))


@pytest.mark.follows("test_log1p_1")
def test_log1p_1(op_tester):
    check_unary(op_tester, HUGE, _build, _log1p, modes=("infer",))


@pytest.mark.follows("test_log1p_nan")
def test_log1p_nan(op_tester):
    op_tester.equal_nan = True
    check_unary(op_tester, INVALID, _build, _log1p, modes=("infer",))


@pytest.mark.follows("test_log1p_inplace_0")
def test_log1p_inplace_0(op_tester):
    check_unary(op_tester, MIXED, _build, _log1p, modes=("inplace",))


@pytest.mark.follows("test_log1p_inplace_1")
def test_log1p_inplace_1(op_tester):
    ones = np.ones(4, np.float32)
    for priority in [-100.0, +100.0]:
        d1 = np.random.rand(4).astype(np.float32)

        def init_builder(builder, d1=d1, priority=priority):
            i1, i2, i3 = (builder.addInputTensor(d) for d in (d1, ones, ones))
            o0 = builder.aiGraphcore.log1p([builder.aiOnnx.sub([i1, i2])])
            builder.setInplacePreferences(o0, {"Log1pInplace": priority})
            o2 = builder.aiGraphcore.log1p([builder.aiOnnx.sub([builder.aiOnnx.exp([o0]), i3])])
            builder.setInplacePreferences(o2, {"Log1pInplace": priority})
            o3 = builder.aiOnnx.exp([o2])
            builder.addOutputTensor(o3)
            return [o3]

        op_tester.rtol, op_tester.atol = 1e-5, 1e-6
        op_tester.run(init_builder, lambda _, d1=d1: [d1], "infer")


@pytest.mark.follows("test_log1p_inplace_2")
def test_log1p_inplace_2(op_tester):
    for priority in [-100.0, +100.0]:
        d1 = np.random.rand(4).astype(np.float32)

        def init_builder(builder, d1=d1, priority=priority):
            i1 = builder.addInputTensor(d1)
            outs = []
            for _ in range(3):
                outs.append(builder.aiGraphcore.log1p([i1]))
                builder.setInplacePreferences(outs[-1], {"Log1pInplace": priority})
            return [builder.aiOnnx.sum(outs)]

        op_tester.rtol, op_tester.atol = 1e-5, 1e-6
        op_tester.run(init_builder, lambda _, d1=d1: [(3 * np.log1p(d1)).astype(np.float32)])


def _grad(op_tester, data):
    op_tester.setPatterns(["PreUniRepl", "Log1pGradOp"], enableRuntimeAsserts=False)
    check_unary(op_tester, data, _build, _log1p, _derivative, modes=("train",))


@pytest.mark.follows("test_log1p_grad_0")
def test_log1p_grad_0(op_tester):
    _grad(op_tester, MIXED)


@pytest.mark.follows("test_log1p_grad_1")
def test_log1p_grad_1(op_tester):
    _grad(op_tester, HUGE)


@pytest.mark.follows("test_log1p_grad_nan")
def test_log1p_grad_nan(op_tester):
    op_tester.equal_nan = True
    _grad(op_tester, INVALID)
