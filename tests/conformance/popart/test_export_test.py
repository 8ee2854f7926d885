"""graphcore/popart tests/integration/export_test.py: `modelToHost` of a training session whose
model has a Constant and no weights writes back the model unchanged (and the output is
right), and refuses before `prepareDevice` (Cpu)."""

import numpy as np
import pytest

import popart


def _session():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]))
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]))
    c = builder.aiOnnx.constant(np.array([[1, 2], [3, 4]], dtype=np.float32))
    o2 = builder.aiOnnx.add([builder.aiOnnx.add([i1, i2]), c])
    loss = builder.aiGraphcore.identityloss([o2])
    proto = builder.getModelProto()
    session = popart.TrainingSession(
        fnModel=proto,
        dataFlow=popart.DataFlow(1, {o2: popart.AnchorReturnType("All")}),
        userOptions=popart.SessionOptions(),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    return session, proto, (i1, i2, o2)


@pytest.mark.follows("test_constants_preserved")
def test_constants_preserved(tmp_path):
    session, proto, (i1, i2, o2) = _session()
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    inputs = {i1: np.full((2, 2), 2, np.float32), i2: np.full((2, 2), 4, np.float32)}
    session.run(popart.PyStepIO(inputs, anchors))
    path = tmp_path / "session_proto.onnx"
    session.modelToHost(str(path))
    # No trainable parameters: the model is the same after training.
    assert path.read_bytes() == proto
    np.testing.assert_allclose(anchors[o2], [[7, 8], [9, 10]], atol=1e-8)


@pytest.mark.follows("test_no_prepare_device")
def test_no_prepare_device(tmp_path):
    session, _, _ = _session()
    with pytest.raises(popart.popart_exception) as error:
        session.modelToHost(str(tmp_path / "session_proto.onnx"))
    assert error.value.args[0].startswith(
        "Devicex::prepare() must be called before Devicex::weightsToHost"
    )
