"""graphcore/popart tests/integration/operators_test/gt_lt_test.py: Greater and Less, also
broadcast (Cpu)."""

import numpy as np
import pytest


def _compare(op_tester, op_name, shape1, reference):
    d1 = np.random.rand(*shape1).astype(np.float32)
    d2 = np.random.rand(2).astype(np.float32)

    def init_builder(builder):
        i1, i2 = builder.addInputTensor(d1), builder.addInputTensor(d2)
        o = getattr(builder.aiOnnx, op_name)([i1, i2])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [reference(d1, d2)], step_type="infer")


@pytest.mark.follows("test_greater")
def test_greater(op_tester):
    _compare(op_tester, "greater", [2], np.greater)


@pytest.mark.follows("test_broadcast_greater")
def test_broadcast_greater(op_tester):
    _compare(op_tester, "greater", [2, 2], np.greater)


@pytest.mark.follows("test_less")
def test_less(op_tester):
    _compare(op_tester, "less", [2], np.less)


@pytest.mark.follows("test_broadcast_less")
def test_broadcast_less(op_tester):
    _compare(op_tester, "less", [2, 2], np.less)
