"""graphcore/popart tests/integration/identical_replica_test.py: with stochastic rounding on,
two replicas fed the same float16 data end a ConstSGD step with bitwise identical updated
weights (anchored as `UpdatedVar___<w>`, FINAL). The original runs on two IPUs of hardware;
here on two emulated IPUs."""

import numpy as np
import pytest
from popart_session_helpers import ipu_model_device

import popart


@pytest.mark.follows("test_replica_bitwise_identical_update")
def test_replica_bitwise_identical_update():
    np.random.seed(1984)
    input_data = np.random.rand(2, 4).astype(np.float16)
    weight_data = np.random.rand(4, 4).astype(np.float16)
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT16", input_data.shape), "data0")
    w0 = builder.addInitializedInputTensor(weight_data, "weight0")
    loss = builder.aiGraphcore.l1loss([builder.aiOnnx.matmul([d0, w0])], 0.1, debugContext="loss")
    options = popart.SessionOptions()
    options.enableStochasticRounding = True
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = 2
    options.engineOptions = {"target.deterministicWorkers": "portable"}
    updated = popart.reservedUpdatedVarPrefix() + w0
    device = ipu_model_device(2)
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(
                1,
                {
                    loss: popart.AnchorReturnType("ALL"),
                    updated: popart.AnchorReturnType("FINAL"),
                },
            ),
            userOptions=options,
            loss=loss,
            optimizer=popart.ConstSGD(0.1),
            deviceInfo=device,
        )
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        feed = np.repeat(input_data[np.newaxis], 2, 0)
        session.run(popart.PyStepIO({d0: feed}, anchors))
    finally:
        device.detach()
    result = anchors[updated]
    assert result.shape == (2, 4, 4)
    assert np.array_equal(result[0], result[1])
    # The update moved the weights (by the summed gradient of both replicas' L1 loss).
    assert not np.array_equal(result[0], weight_data)
