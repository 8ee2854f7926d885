"""graphcore/popart tests/integration/transformation_tests/batchserialize_dropout_test.py:
with batch serialization (factor 4) and recomputation, two dropouts of one tensor draw
different masks for every sample, with and without outlining (Cpu). The original skips it
(its batch-serialized dropouts were to do); here it runs."""

import numpy as np
import pytest

import popart


def _dropouts(outlining):
    np.random.seed(1984)
    input_data = np.random.rand(4, 100).astype(np.float32)
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", input_data.shape), "data0")
    weight_data = np.random.rand(100, 100).astype(np.float32)
    w0 = builder.addInitializedInputTensor(weight_data)
    x = builder.aiOnnx.matmul([d0, w0])
    x1 = builder.aiOnnx.dropout([x], 1, debugContext="dropout0")[0]
    x2 = builder.aiOnnx.dropout([x], 1, debugContext="dropout1")[0]
    loss = builder.aiGraphcore.l1loss([builder.aiOnnx.add([x1, x2])], 0.1)
    options = popart.SessionOptions()
    options.enableOutlining = outlining
    options.autoRecomputation = popart.RecomputationType.Standard
    options.explicitRecomputation = True
    options.batchSerializationSettings.factor = 4
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {t: popart.AnchorReturnType("ALL") for t in (x1, x2)}),
        userOptions=options,
        loss=loss,
        optimizer=popart.SGD({"defaultLearningRate": (0.1, True)}),
        patterns=popart.Patterns(),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({d0: input_data}, anchors))
    return [anchors[x1], anchors[x2]], input_data @ weight_data


@pytest.mark.follows("test_batchserialisation_dropout")
@pytest.mark.parametrize("outlining", [False, True])
def test_batchserialisation_dropout(outlining):
    (dropout0, dropout1), product = _dropouts(outlining)
    samples = [*dropout0, *dropout1]
    for i, t1 in enumerate(samples):
        for j, t2 in enumerate(samples):
            if i != j:
                assert np.any((t1 == 0) != (t2 == 0))
    # (Beyond the original) the kept elements are the MatMul's, scaled by 1 / (1 - 0.5).
    for dropout in (dropout0, dropout1):
        kept = dropout != 0
        np.testing.assert_allclose(dropout[kept], 2 * product[kept], rtol=1e-4)
