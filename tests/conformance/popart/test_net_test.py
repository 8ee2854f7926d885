"""graphcore/popart tests/integration/net_test.py: sessions from model bytes and from a file,
and the errors for no anchors and for a string that is no model (Cpu)."""

import pytest

import popart


def _adder():
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT", [1, 2, 32, 32])
    o = builder.aiOnnx.add([builder.addInputTensor(shape), builder.addInputTensor(shape)])
    builder.addOutputTensor(o)
    return builder.getModelProto(), o


def _session(model, anchors):
    return popart.InferenceSession(
        fnModel=model,
        dataFlow=popart.DataFlow(1, anchors),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )


@pytest.mark.follows("test_net_from_string")
def test_net_from_string():
    proto, o = _adder()
    _session(proto, {o: popart.AnchorReturnType("All")})


@pytest.mark.follows("test_net_from_file")
def test_net_from_file(tmp_path):
    proto, o = _adder()
    path = tmp_path / "test.onnx"
    path.write_bytes(proto)
    _session(str(path), {o: popart.AnchorReturnType("All")})


@pytest.mark.follows("test_net_failure1")
def test_net_failure1():
    proto, _ = _adder()
    with pytest.raises(popart.popart_exception) as e_info:
        _session(proto, {})
    assert e_info.value.args[0] == "User must specify an anchor tensor when doing inference."


@pytest.mark.follows("test_net_failure2")
def test_net_failure2():
    with pytest.raises(popart.popart_exception) as e_info:
        _session("nothing", {})
    assert e_info.value.args[0].startswith("Failed to load a ModelProto from the string")
