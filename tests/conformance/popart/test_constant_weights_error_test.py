"""graphcore/popart tests/integration/constant_weights_error_test.py: writeWeights on an
InferenceSession with constant weights fails with the original's message (IpuModel: the
original requires it)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_constant_weights_write_error")
def test_constant_weights_write_error():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    weight = builder.addInitializedInputTensor(np.array([10], dtype=np.float32))
    output = builder.aiOnnx.add([x, weight])
    builder.addOutputTensor(output)
    session = popart.InferenceSession(
        builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {output: popart.AnchorReturnType("ALL")}),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 1}),
        userOptions=popart.SessionOptions(),
    )
    session.prepareDevice()
    with pytest.raises(popart.popart_exception) as e_info:
        session.writeWeights(popart.PyWeightsIO({weight: np.array([100], dtype=np.float32)}))
    assert e_info.value.args[0].endswith(
        "Cannot call writeWeights when constantWeights is set. Set `constantWeights` to False"
        " in the `SessionOption`s when initialising the session to enable this behaviour."
    )
