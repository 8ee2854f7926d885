"""graphcore/popart tests/integration/operators_test/binaryop_error_test.py: adding shapes
that do not broadcast fails at session creation, naming the op and both shapes (IpuModel
device, as the original's test creates)."""

import pytest

import popart


@pytest.mark.follows("test_binaryop_error")
def test_binaryop_error():
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    a = builder.addInputTensor(popart.TensorInfo("FLOAT", [10, 10]), "A")
    b = builder.addInputTensor(popart.TensorInfo("FLOAT", [10, 5]), "B")
    c = builder.aiOnnx.add([a, b], "C")
    builder.addOutputTensor(c)
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 1})
    with pytest.raises(popart.popart_exception) as e_info:
        popart.InferenceSession(
            fnModel=builder.getModelProto(),
            deviceInfo=device,
            dataFlow=popart.DataFlow(1, {c: popart.AnchorReturnType("ALL")}),
        )
    message = e_info.value.args[0]
    assert "np broadcasting failed on 'Op" in message
    assert "ai.onnx.Add" in message
    assert "frames [10, 10] and [10, 5] are not aligned" in message
