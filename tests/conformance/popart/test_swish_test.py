"""graphcore/popart tests/integration/operators_test/swish_test.py: ai.graphcore Swish
(x * sigmoid(x)) over the whole float32 range, its gradient, and its inferred shape and
type (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_unary

import popart

F32 = np.finfo(np.float32)
# Spaced in float64: numpy 2's float32 linspace overflows on max - min.
DATA = np.linspace(float(F32.min), float(F32.max), num=240).astype(np.float32).reshape(5, 3, 4, 4)


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x.astype(np.float64)))


def _swish(x):
    return (x * _sigmoid(x)).astype(np.float32)


def _build(b, i):
    return b.aiGraphcore.swish([i], debugContext="test_swish")


@pytest.mark.follows("test_swish")
def test_swish(op_tester):
    check_unary(op_tester, DATA, _build, _swish, modes=("infer",))


@pytest.mark.follows("test_swish_grad")
def test_swish_grad(op_tester):
    def derivative(x):
        s = _sigmoid(x)
        return s + x.astype(np.float64) * s * (1 - s)

    check_unary(op_tester, DATA, _build, _swish, derivative, modes=("train",))


@pytest.mark.follows("test_swish_shape_infer")
def test_swish_shape_infer():
    builder = popart.Builder()
    tensor = builder.addInputTensor(popart.TensorInfo("FLOAT", [5, 3, 4, 4]))
    out = builder.aiGraphcore.swish([tensor])
    builder.addOutputTensor(out)
    assert builder.getTensorShape(out) == [5, 3, 4, 4]
    assert builder.getTensorDtypeString(out) == "float32"
