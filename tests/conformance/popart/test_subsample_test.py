"""graphcore/popart tests/integration/operators_test/subsample_test.py: ai.graphcore
Subsample by strides of 1 to 4 (the first element of each stride window kept) and its
gradient, with the original's expected values, and a zero stride refused (Cpu)."""

import numpy as np
import pytest

import popart

DATA = np.array([[1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6], [4, 5, 6, 7]], dtype=np.float32)


def _mask(rows, cols):
    grad = np.zeros((4, 4), np.float32)
    grad[np.ix_(rows, cols)] = 1.0
    return grad


def _subsample(op_tester, strides, output, grad_output):
    def init_builder(builder):
        i1 = builder.addInputTensor(DATA)
        o = builder.aiGraphcore.subsample([i1], strides)
        builder.addOutputTensor(o)
        return [o, popart.reservedGradientPrefix() + i1]

    op_tester.lossReduction = popart.ReductionType.Sum
    op_tester.setPatterns(["PreUniRepl", "SqrtGradOp"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [output, grad_output], "train")


@pytest.mark.follows("test_subsample1")
def test_subsample1(op_tester):
    _subsample(op_tester, [2, 2], np.array([[1, 3], [3, 5]], np.float32), _mask([0, 2], [0, 2]))


@pytest.mark.follows("test_subsample2")
def test_subsample2(op_tester):
    _subsample(op_tester, [1, 1], DATA, np.ones((4, 4), np.float32))


@pytest.mark.follows("test_subsample3")
def test_subsample3(op_tester):
    _subsample(op_tester, [2, 1], DATA[::2], _mask([0, 2], [0, 1, 2, 3]))


@pytest.mark.follows("test_subsample4")
def test_subsample4(op_tester):
    _subsample(op_tester, [3, 3], np.array([[1, 4], [4, 7]], np.float32), _mask([0, 3], [0, 3]))


@pytest.mark.follows("test_subsample5")
def test_subsample5(op_tester):
    _subsample(op_tester, [4, 4], np.array([[1]], np.float32), _mask([0], [0]))


@pytest.mark.follows("test_subsample6")
def test_subsample6(op_tester):
    with pytest.raises(popart.popart_exception) as e_info:
        _subsample(op_tester, [4, 0], np.array([[1]], np.float32), _mask([0], [0]))
    assert e_info.value.args[0].startswith("Strides invalid. 0 stride at index 1")
