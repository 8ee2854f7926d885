"""graphcore/popart tests/integration/operators_test/atan2_test.py: ai.graphcore Atan2 on
a grid of quadrants, in float16, reshaped, broadcast, without inplacing, and its gradient,
against numpy (Cpu)."""

import numpy as np
import pytest

import popart

VALS = np.linspace(-5, 5, 21, dtype=np.float32)


def _run(op_tester, y, x):
    def init_builder(builder):
        o = builder.aiGraphcore.atan2([builder.addInputTensor(y), builder.addInputTensor(x)])
        builder.addOutputTensor(o)
        return [o]

    def reference(_):
        return [np.arctan2(y.astype(np.float32), x.astype(np.float32)).astype(y.dtype)]

    op_tester.run(init_builder, reference, "infer")


@pytest.mark.follows("test_atan2_basic")
def test_atan2_basic(op_tester):
    _run(op_tester, *np.meshgrid(VALS, VALS))


@pytest.mark.follows("test_atan2_float16")
def test_atan2_float16(op_tester):
    op_tester.atol = 1e-2
    _run(op_tester, *np.meshgrid(VALS.astype(np.float16), VALS.astype(np.float16)))


@pytest.mark.follows("test_atan2_reshaped")
def test_atan2_reshaped(op_tester):
    y, x = np.meshgrid(VALS, VALS)
    _run(op_tester, y.reshape(7, 3, -1), x.reshape(7, 3, -1))


@pytest.mark.follows("test_atan2_broadcasting_y")
def test_atan2_broadcasting_y(op_tester):
    _run(op_tester, VALS, np.array([0.0], dtype=np.float32))


@pytest.mark.follows("test_atan2_outplace")
def test_atan2_outplace(op_tester):
    op_tester.inplacing = False
    _run(op_tester, *np.meshgrid(VALS, VALS))


@pytest.mark.follows("test_atan2_grad")
def test_atan2_grad(op_tester):
    y, x = np.meshgrid(VALS, VALS)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1, i2 = builder.addInputTensor(y), builder.addInputTensor(x)
        o = builder.aiGraphcore.atan2([i1, i2])
        builder.addOutputTensor(o)
        return [o, g + i1, g + i2, g + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        with np.errstate(divide="ignore", invalid="ignore"):
            r2 = x * x + y * y
            # d/dy = x / r2, d/dx = -y / r2 (NaN at the origin, as torch gives).
            return [np.arctan2(y, x), d__o * x / r2, d__o * -y / r2, None]

    op_tester.equal_nan = True
    op_tester.run(init_builder, reference, "train")
