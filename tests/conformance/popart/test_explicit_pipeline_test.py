"""graphcore/popart tests/integration/pipelining_tests/explicit_pipeline_test.py: a three-stage
pipelined inference gives the same anchors with the explicit IR (explicit pipelining and host
IO) as with the implicit one (IpuModel2, three IPUs)."""

import numpy as np
import pytest

import popart


def _anchors(explicit):
    bps = 3
    np.random.seed(1)
    builder = popart.Builder()
    t0 = builder.addInputTensor("FLOAT", [2, 2])
    t1_data = np.random.rand(2, 2).astype(np.float32)
    t1 = builder.addInitializedInputTensor(t1_data)
    with builder.virtualGraph(0), builder.pipelineStage(0):
        t2 = builder.aiOnnx.matmul([t0, t1])
    with builder.virtualGraph(1), builder.pipelineStage(1):
        t3 = builder.aiOnnx.relu([t2])
    with builder.virtualGraph(2), builder.pipelineStage(2):
        t4 = builder.aiOnnx.softmax([t3])
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.explicitRecomputation = True
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    options.enableExplicitIR(explicit)
    device = popart.DeviceManager().createIpuModelDevice(
        {"numIPUs": 3, "tilesPerIPU": 4, "ipuVersion": "ipu2"}
    )
    try:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(bps, [t4]),
            deviceInfo=device,
            userOptions=options,
        )
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        t0_data = np.random.rand(bps, 2, 2).astype(np.float32)
        session.run(popart.PyStepIO({t0: t0_data}, anchors))
    finally:
        device.detach()
    return anchors, (t0_data, t1_data, t4)


@pytest.mark.follows("test_explicit_pipelining_0")
def test_explicit_pipelining_0():
    explicit, (t0_data, t1_data, t4) = _anchors(explicit=True)
    implicit, _ = _anchors(explicit=False)
    assert explicit.keys() == implicit.keys()
    for key in explicit:
        np.testing.assert_allclose(explicit[key], implicit[key], rtol=1e-6)
    # (Beyond the original) both are numpy's softmax(relu(x @ w)).
    logits = np.maximum(t0_data @ t1_data, 0)
    expected = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(explicit[t4], expected, rtol=1e-5)
