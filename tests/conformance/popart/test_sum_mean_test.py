"""graphcore/popart tests/integration/operators_test/sum_mean_test.py: Sum and Mean of inputs
that broadcast, of one input, their gradients (summed back to each input's shape), and
Mean-6's refusal of inputs of different shapes (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import unbroadcast

import popart

BROADCASTING = [(8, 7), (6, 8, 7), (6, 1, 7), (7,), (6, 8, 7)]


@pytest.mark.follows("test_sum")
def test_sum(op_tester):
    d1, d2, d3 = (np.random.rand(*s).astype(np.float32) for s in [(1, 2, 1), (1, 1, 2), (2, 1, 1)])

    def init_builder(builder):
        inputs = [builder.addInputTensor(d) for d in (d1, d2, d3)]
        o = builder.aiOnnx.sum(inputs, "test_sum")
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [d1 + d2 + d3])


@pytest.mark.follows("test_sum_1_input")
def test_sum_1_input(op_tester):
    d1 = np.random.rand(2, 2).astype(np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.sum([builder.addInputTensor(d1)], "test_sum")
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns([], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [d1])


def _training(op_tester, kind, shapes, opsets=None):
    data = [np.random.rand(*s).astype(np.float32) for s in shapes]
    g = popart.reservedGradientPrefix()
    scale = 1.0 / len(data) if kind == "mean" else 1.0

    def init_builder(builder):
        inputs = [builder.addInputTensor(d) for d in data]
        o = getattr(builder.aiOnnx, kind)(inputs, f"test_{kind}")
        builder.addOutputTensor(o)
        return [o, *[g + i for i in inputs], g + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        out = sum(np.broadcast_arrays(*data)) * np.float32(scale)
        grads = [unbroadcast(d__o * np.float32(scale), d.shape) for d in data]
        return [out, *grads, d__o]

    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    op_tester.rtol, op_tester.atol = 1e-5, 1e-6
    op_tester.run(init_builder, reference, "train", opsets)


@pytest.mark.follows("test_X_training")
def test_X_training(op_tester):  # noqa: N802
    _training(op_tester, "mean", BROADCASTING)


@pytest.mark.follows("test_mean_training")
def test_mean_training(op_tester):
    _training(op_tester, "mean", BROADCASTING)


@pytest.mark.follows("test_sum_training")
def test_sum_training(op_tester):
    _training(op_tester, "sum", BROADCASTING)


@pytest.mark.follows("test_mean_training_2")
def test_mean_training_2(op_tester):
    _training(op_tester, "mean", [(8, 7)] * 5, {"ai.onnx": 7, "ai.graphcore": 1})


@pytest.mark.follows("test_mean_training_3")
def test_mean_training_3(op_tester):
    with pytest.raises(popart.popart_exception) as e_info:
        _training(op_tester, "mean", BROADCASTING, {"ai.onnx": 7, "ai.graphcore": 1})
    assert "Inputs to ai.onnx.Mean:6 do not all the same type & shape" in e_info.value.args[0]
