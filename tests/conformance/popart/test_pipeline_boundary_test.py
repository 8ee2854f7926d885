"""graphcore/popart tests/integration/pipelining_tests/pipeline_boundary_test.py: a pipelined
training step whose stage boundary is a Reshape gives the same activations whether that
Reshape is preferred in place or not (IpuModel2, two IPUs)."""

import numpy as np
import pytest

import popart

DEVICE = "IpuModel2"


def _run(input_, w0_init, inplace_reshape):
    builder = popart.Builder()
    in0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 2]))
    w0 = builder.addInitializedInputTensor(w0_init)
    with builder.virtualGraph(0):
        act = builder.aiOnnx.relu([builder.aiOnnx.matmul([in0, w0])])
        act = builder.aiOnnx.reshape([act, builder.aiOnnx.constant(np.asarray([2, 8]))])
    with builder.virtualGraph(1):
        loss = builder.aiGraphcore.identityloss([act])
    builder.addOutputTensor(act)
    builder.setInplacePreferences(act, {"ReshapeInplace": 10 if inplace_reshape else -10})
    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    options.enablePipelining = True
    patterns = popart.Patterns(popart.PatternsLevel.Default)
    patterns.InPlace = True
    device = popart.DeviceManager().createIpuModelDevice(
        {"numIPUs": 2, "tilesPerIPU": 4, "ipuVersion": "ipu2"}
    )
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(4, [act]),
            deviceInfo=device,
            optimizer=popart.ConstSGD(0.1),
            loss=loss,
            userOptions=options,
            patterns=patterns,
        )
        anchors = session.initAnchorArrays()
        session.prepareDevice()
        session.weightsFromHost()
        session.run(popart.PyStepIO({in0: input_}, anchors))
    finally:
        device.detach()
    return np.copy(anchors[act])


@pytest.mark.follows("test_pipeline_boundary")
def test_pipeline_boundary():
    np.random.seed(0)
    input_ = np.random.random_sample([4, 4, 2]).astype("float32")
    w0_init = np.random.random_sample([2, 4]).astype("float32")
    in_place = _run(input_, w0_init, inplace_reshape=True)
    not_in_place = _run(input_, w0_init, inplace_reshape=False)
    np.testing.assert_allclose(in_place, not_in_place, rtol=1e-6)
    # (Beyond the original) the first batch saw the initial weights: numpy's answer.
    first = np.maximum(input_[0] @ w0_init, 0).reshape(2, 8)
    np.testing.assert_allclose(in_place[0], first, rtol=1e-6)
