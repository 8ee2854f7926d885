"""graphcore/popart tests/integration/operators_test/abs_sign_test.py: Abs and Sign with
their gradients (Cpu)."""

import numpy as np
import pytest

import popart


def _data():
    d1 = 6 * np.random.rand(10).astype(np.float32) - 3
    d1[3] = 0  # the gradient at zero
    return d1


def _train(op_tester, op_name, patterns, forward, derivative):
    d1 = _data()

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = getattr(builder.aiOnnx, op_name)([i1], f"test_{op_name}")
        builder.addOutputTensor(o)
        g = popart.reservedGradientPrefix()
        return [o, g + o, g + i1]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        return [forward(d1), d__o, derivative(d1) * d__o]

    op_tester.setPatterns(patterns, enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_abs_training")
def test_abs_training(op_tester):
    # torch's abs has gradient sign(x), 0 at 0.
    _train(op_tester, "abs", ["AbsGradOp"], np.abs, np.sign)


@pytest.mark.follows("test_sign_training")
def test_sign_training(op_tester):
    _train(op_tester, "sign", ["AbsGradOp", "ZerosLikeOpPattern"], np.sign, np.zeros_like)
