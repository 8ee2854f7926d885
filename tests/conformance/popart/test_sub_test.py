"""graphcore/popart tests/integration/operators_test/sub_test.py: Sub, broadcast or not,
forward and gradients (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_binary_training


def _sub(b, x, y):
    return b.aiOnnx.sub([x, y])


def _infer(op_tester, shape2):
    d1 = np.random.randn(*([4, 18] if shape2 else [4])).astype(np.float32)
    d2 = np.random.randn(*(shape2 or [4])).astype(np.float32)

    def init_builder(builder):
        o = _sub(builder, builder.addInputTensor(d1), builder.addInputTensor(d2))
        builder.addOutputTensor(o)
        return [o]

    op_tester.equal_nan = True
    op_tester.run(init_builder, lambda _: [d1 - d2], step_type="infer")


def _train(op_tester, shape1, shape2):
    d1 = np.random.randn(*shape1).astype(np.float32)
    d2 = np.random.randn(*shape2).astype(np.float32)
    op_tester.equal_nan = True
    op_tester.setPatterns(["SubtractArg1GradOp"], enableRuntimeAsserts=False)
    check_binary_training(
        op_tester, _sub, d1, d2, np.subtract, lambda a, b: (np.ones_like(a), -np.ones_like(b))
    )


@pytest.mark.follows("test_sub")
def test_sub(op_tester):
    _infer(op_tester, None)


@pytest.mark.follows("test_broadcast_sub")
def test_broadcast_sub(op_tester):
    _infer(op_tester, [4, 1])


@pytest.mark.follows("test_sub_grad")
def test_sub_grad(op_tester):
    _train(op_tester, [4], [4])


@pytest.mark.follows("test_broadcast_sub_grad")
def test_broadcast_sub_grad(op_tester):
    _train(op_tester, [4, 18], [4, 1])
