"""graphcore/popart tests/integration/optimizer_tests/sgd_mixed_mode_test_py_0.py: SGD with a
const default learning rate and a non-const one specific to one weight, replaced between two
runs: each weight moves by its own rates (L1 loss of a sum: every gradient is 1) (Cpu). The
original also counts the SGD ops' Poplar debug contexts."""

import numpy as np
import pytest
from popart_mixed_mode_checks import op_debug_contexts

import popart
from conftest import create_test_device

NAMES = ["__w0__", "__w1__", "__w2__"]


def _sgd(specific_rate):
    optimizer = popart.SGD(
        {
            "defaultLearningRate": (0.1, True),
            "defaultWeightDecay": (0, False),
            "lossScaling": (10, True),
        }
    )
    optimizer.insertSpecific(
        NAMES[1], {"weightDecay": (0, True), "learningRate": (specific_rate, False)}
    )
    return optimizer


def _train_twice():
    builder = popart.Builder()
    data = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 1]), "input0")
    out = data
    for name, value in zip(NAMES, (100.0, 200.0, 300.0), strict=True):
        weight = builder.addInitializedInputTensor(np.array([value], np.float32), name)
        out = builder.aiOnnx.add([weight, out])
    loss = builder.aiGraphcore.l1loss([out], 1.0)
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {}),
        loss=loss,
        optimizer=_sgd(0.2),
        patterns=popart.Patterns(popart.PatternsLevel.Default),
        deviceInfo=create_test_device(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    stepio = popart.PyStepIO({data: np.array([3.1415], np.float32)}, {})
    session.run(stepio)
    session.updateOptimizerFromHost(_sgd(0.5))
    session.run(stepio)
    weights = {name: np.full([1], -777.0, np.float32) for name in NAMES}
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO(weights))
    return weights


@pytest.mark.follows("test_sgd_mixed_mode")
def test_sgd_mixed_mode():
    weights = _train_twice()
    np.testing.assert_allclose(weights[NAMES[0]], [100.0 - 0.1 - 0.1], rtol=1e-6)
    np.testing.assert_allclose(weights[NAMES[1]], [200.0 - 0.2 - 0.5], rtol=1e-6)
    np.testing.assert_allclose(weights[NAMES[2]], [300.0 - 0.1 - 0.1], rtol=1e-6)


@pytest.mark.follows("test_sgd_mixed_mode")
def test_sgd_mixed_mode_debug_contexts(tmp_path):
    assert len(op_debug_contexts(tmp_path, _train_twice, "SGD")) == 6
