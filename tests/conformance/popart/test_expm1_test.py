"""graphcore/popart tests/integration/operators_test/expm1_test.py: ai.graphcore Expm1
(exp(x) - 1), in place or not with either in-place preference, and its gradient (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

SMALL = np.array([-2, -1, 0, 1, 2], dtype=np.float32)
WIDE = np.linspace(-10, 10, 100, dtype=np.float32)


def _build(b, i):
    return b.aiGraphcore.expm1([i])


def _expm1(x):
    return np.expm1(x.astype(np.float64)).astype(np.float32)


@pytest.mark.follows("test_expm1_0")
def test_expm1_0(op_tester):
    check_unary(op_tester, SMALL, _build, _expm1, modes=("infer",))


@pytest.mark.follows("test_expm1_1")
def test_expm1_1(op_tester):
    # The original compares with exp(x) - 1 here, with expm1 in the next test.
    op_tester.atol = 1e-6
    check_unary(op_tester, WIDE, _build, lambda x: np.exp(x) - np.float32(1), modes=("infer",))


@pytest.mark.follows("test_expm1_2")
def test_expm1_2(op_tester):
    check_unary(op_tester, WIDE, _build, _expm1, modes=("infer",))


@pytest.mark.follows("test_expm1_inplace_0")
def test_expm1_inplace_0(op_tester):
    op_tester.atol = 1e-6
    check_unary(op_tester, WIDE, _build, _expm1, modes=("inplace",))


@pytest.mark.follows("test_expm1_inplace_1")
def test_expm1_inplace_1(op_tester):
    ones = np.ones(4, np.float32)
    for priority in [-100.0, +100.0]:
        d1 = np.random.rand(4).astype(np.float32)

        def init_builder(builder, d1=d1, priority=priority):
            i1, i2, i3 = (builder.addInputTensor(d) for d in (d1, ones, ones))
            e0 = builder.aiGraphcore.expm1([i1])
            builder.setInplacePreferences(e0, {"Expm1Inplace": priority})
            e1 = builder.aiGraphcore.expm1([builder.aiOnnx.log([builder.aiOnnx.add([e0, i2])])])
            builder.setInplacePreferences(e1, {"Expm1Inplace": priority})
            o3 = builder.aiOnnx.log([builder.aiOnnx.add([e1, i3])])
            builder.addOutputTensor(o3)
            return [o3]

        op_tester.rtol, op_tester.atol = 1e-5, 1e-6
        op_tester.run(init_builder, lambda _, d1=d1: [d1], "infer")


@pytest.mark.follows("test_expm1_inplace_2")
def test_expm1_inplace_2(op_tester):
    for priority in [-100.0, +100.0]:
        d1 = np.random.rand(4).astype(np.float32)

        def init_builder(builder, d1=d1, priority=priority):
            i1 = builder.addInputTensor(d1)
            outs = []
            for _ in range(3):
                outs.append(builder.aiGraphcore.expm1([i1]))
                builder.setInplacePreferences(outs[-1], {"Expm1Inplace": priority})
            return [builder.aiOnnx.sum(outs)]

        op_tester.rtol, op_tester.atol = 1e-5, 1e-6
        op_tester.run(init_builder, lambda _, d1=d1: [(3 * np.expm1(d1)).astype(np.float32)])


@pytest.mark.follows("test_expm1_grad_0")
def test_expm1_grad_0(op_tester):
    op_tester.setPatterns(["PreUniRepl", "Expm1GradOp"], enableRuntimeAsserts=False)
    check_unary(op_tester, SMALL, _build, _expm1, np.exp, modes=("train",))


@pytest.mark.follows("test_expm1_grad_1")
def test_expm1_grad_1(op_tester):
    op_tester.setPatterns(["PreUniRepl", "Expm1GradOp"], enableRuntimeAsserts=False)
    op_tester.atol = 1e-6
    check_unary(op_tester, WIDE, _build, _expm1, np.exp, modes=("train",))
