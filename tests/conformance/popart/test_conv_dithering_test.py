"""graphcore/popart tests/integration/conv_dithering_test.py: `setEnableConvDithering` takes
only 0 or 1 and only on a convolution (the original's messages, willow/src/builder.cpp); set
on a convolution, the trained model carries it and trains. (The original also reads
PopLibs' DEBUG log for the convolution's options, which an emulation has not.)"""

import numpy as np
import pytest

import popart


def _train_with_dithering(apply_to_conv, dithering):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 4, 4]))
    w = builder.addInitializedInputTensor(np.ones([3, 2, 3, 3], np.float32))
    act = builder.aiOnnx.conv([x, w], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1])
    o = builder.aiOnnx.relu([act])
    loss = builder.aiGraphcore.identityloss([o])
    builder.setEnableConvDithering(act if apply_to_conv else o, dithering)
    assert builder.getInt64NodeAttribute("__enable_conv_dithering", {act}) == int(dithering)
    g = popart.reservedGradientPrefix()
    opts = popart.SessionOptions()
    opts.constantWeights = False
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {t: popart.AnchorReturnType("All") for t in (o, g + w)}),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
        userOptions=opts,
        deviceInfo=popart.DeviceManager().createIpuModelDevice(
            {"numIPUs": 1, "tilesPerIPU": 4, "ipuVersion": "ipu2"}
        ),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    data = np.random.default_rng(0).random([1, 2, 4, 4]).astype(np.float32)
    session.run(popart.PyStepIO({x: data}, anchors))
    # All-ones kernels: each output channel sums the input over the window, all equal.
    assert np.all(anchors[o] > 0)
    np.testing.assert_allclose(anchors[o][0, 0], anchors[o][0, 2], rtol=1e-6)


@pytest.mark.follows("test_enable_conv_dithering_error")
@pytest.mark.parametrize(
    "apply_to_conv, dithering, message",
    [
        (False, True, "Builder::setEnableConvDithering should only be called on convolutions "
                      "but was given: Relu"),
        (True, False, None),
        (True, True, None),
        (True, 44, "enableConvDithering must be a bool value"),
    ],
)  # fmt: skip
def test_enable_conv_dithering_error(apply_to_conv, dithering, message):
    if message is None:
        _train_with_dithering(apply_to_conv, dithering)
        return
    with pytest.raises(popart.popart_exception) as error:
        _train_with_dithering(apply_to_conv, dithering)
    assert error.value.args[0] == message
