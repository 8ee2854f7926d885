"""graphcore/popart tests/integration/train_then_infer_test.py: weights trained by a
TrainingSession reach an InferenceSession through modelToHost/resetHostWeights; constant
weights refuse resetHostWeights; modelToHost makes the written weights the host's (IpuModel2,
as the original's CMake runs it)."""

import numpy as np
import pytest

import popart


def _device():
    return popart.DeviceManager().createIpuModelDevice(
        {"numIPUs": 1, "tilesPerIPU": 4, "ipuVersion": "ipu2"}
    )


def _conv_relu(channels):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, channels, 4, 4]))
    w = builder.addInitializedInputTensor(
        np.ones([channels if channels == 1 else 3, channels, 3, 3], np.float32)
    )
    act = builder.aiOnnx.conv([x, w], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1])
    o = builder.aiOnnx.relu([act])
    return builder, x, w, o


def _options(constant_weights):
    opts = popart.SessionOptions()
    opts.constantWeights = constant_weights
    return opts


@pytest.mark.follows("test_train_then_infer_via_file")
def test_train_then_infer_via_file(tmp_path):
    builder, x, w, o = _conv_relu(2)
    loss = builder.aiGraphcore.l1loss([o], 0.1)
    g = popart.reservedGradientPrefix()
    device = _device()
    data = np.ones([1, 2, 4, 4], np.float32)
    inference = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        userOptions=_options(False),
        deviceInfo=device,
    )
    inference.prepareDevice()
    training = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {t: popart.AnchorReturnType("All") for t in (o, g + x, g + w)}),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
        userOptions=_options(False),
        deviceInfo=device,
        name="ivor",
    )
    training.prepareDevice()
    training.weightsFromHost()
    train_anchors = training.initAnchorArrays()
    for _ in range(4):
        training.run(popart.PyStepIO({x: data}, train_anchors))
    path = str(tmp_path / "test.onnx")
    training.modelToHost(path)
    inference.resetHostWeights(path)
    inference.weightsFromHost()
    anchors = inference.initAnchorArrays()
    inference.run(popart.PyStepIO({x: data}, anchors))
    # The trained model's forward pass: what training computes with the same weights.
    training.run(popart.PyStepIO({x: data}, train_anchors))
    np.testing.assert_allclose(anchors[o], train_anchors[o], rtol=1e-6)


@pytest.mark.follows("test_cannot_call_resethostweights_with_constant_weights")
def test_cannot_call_resethostweights_with_constant_weights(tmp_path):
    builder, _, _, o = _conv_relu(2)
    builder.addOutputTensor(o)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        userOptions=_options(True),
        deviceInfo=_device(),
    )
    session.prepareDevice()
    path = str(tmp_path / "test.onnx")
    session.modelToHost(path)
    with pytest.raises(popart.popart_exception) as e_info:
        session.resetHostWeights(path)
    assert e_info.value.args[0].startswith(
        "Cannot call resetHostWeights when constantWeights is set"
    )


@pytest.mark.follows("test_modelToHost_calls_resetHostWeights")
def test_modelToHost_calls_resetHostWeights(tmp_path):  # noqa: N802
    builder, x, _, o = _conv_relu(1)
    loss = builder.aiGraphcore.l1loss([o], 0.1)
    builder.addOutputTensor(o)
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        loss=loss,
        optimizer=popart.ConstSGD(0.1),
        userOptions=_options(False),
        deviceInfo=_device(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    inputs = {x: np.ones([1, 1, 4, 4], np.float32)}
    outputs = []
    for _ in range(2):
        session.run(popart.PyStepIO(inputs, anchors))
        outputs.append(np.copy(anchors[o]))
    assert not np.allclose(outputs[0], outputs[1])
    session.modelToHost(str(tmp_path / "test.onnx"))
    session.weightsFromHost()  # the weights modelToHost wrote, not the initial ones
    session.run(popart.PyStepIO(inputs, anchors))
    outputs.append(np.copy(anchors[o]))
    assert not np.allclose(outputs[2], outputs[0])
    assert not np.allclose(outputs[2], outputs[1])
    np.testing.assert_allclose(outputs[2], outputs[1] - (outputs[0] - outputs[1]), rtol=1e-5)
