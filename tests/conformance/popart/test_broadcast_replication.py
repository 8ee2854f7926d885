"""graphcore/popart tests/integration/streammode_tests/test_broadcast_replication.py: an input
with `ReplicatedStreamMode.Broadcast` settings gets the same host data in every replica (the
host gives it without a replica axis), so every replica's matmul output equals the numpy
product. The original runs it on IPU hardware; here on emulated IPUs."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_broadcast_replication")
@pytest.mark.parametrize("dim", [4, 8])
@pytest.mark.parametrize("replicas", [2, 4])
def test_broadcast_replication(replicas, dim):
    batches = 16
    rng = np.random.default_rng(3)
    builder = popart.Builder()
    x = builder.addInputTensor(
        popart.TensorInfo("FLOAT", [dim, dim, dim]),
        settings=popart.InputSettings(popart.ReplicatedStreamMode.Broadcast),
        debugContext="input",
    )
    weights = rng.random((dim, dim)).astype(np.float32)
    w = builder.addInitializedInputTensor(weights, debugContext="weights")
    o = builder.aiOnnx.matmul([x, w])
    builder.addOutputTensor(o)
    options = popart.SessionOptions()
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = replicas
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": replicas, "tilesPerIPU": 4})
    with device:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(batches, {o: popart.AnchorReturnType("ALL")}),
            userOptions=options,
            deviceInfo=device,
        )
        session.prepareDevice()
        data = rng.standard_normal((batches, dim, dim, dim)).astype(np.float32)
        anchors = session.initAnchorArrays()
        session.weightsFromHost()
        session.run(popart.PyStepIO({x: data}, anchors))
    assert anchors[o].shape == (batches, replicas, dim, dim, dim)
    for replica in range(replicas):
        np.testing.assert_allclose(anchors[o][:, replica], data @ weights, rtol=1e-5, atol=1e-5)
