"""graphcore/popart tests/integration/np_memory_layout_test.py: non-contiguous (transposed)
numpy arrays are taken as values of initializers and constants, and refused as step IO
buffers, by PyStepIO and PyStepIOCallback (IpuModel, as the original's tests create)."""

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import popart


def _identity_session(builder, output):
    builder.addOutputTensor(output)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {output: popart.AnchorReturnType("ALL")}),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 1}),
    )
    session.prepareDevice()
    session.weightsFromHost()
    return session


def _transposed(shape):
    return np.transpose(np.random.randint(0, 100, size=shape, dtype="int32"))


@pytest.mark.follows("test_np_memory_layout_add_initialized_input_tensor1")
def test_np_memory_layout_add_initialized_input_tensor1():
    value = _transposed((2, 3))
    builder = popart.Builder()
    out = builder.aiOnnx.identity([builder.addInitializedInputTensor(value)])
    session = _identity_session(builder, out)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({}, anchors))
    np.testing.assert_array_equal(anchors[out], value)


@pytest.mark.follows("test_np_memory_layout_add_initialized_input_tensor2")
def test_np_memory_layout_add_initialized_input_tensor2():
    plain = np.random.randint(0, 100, size=(3, 5), dtype="int32")
    transposed = _transposed((20, 30))
    builder = popart.Builder()
    builder.addInitializedInputTensor(plain, "contiguous_input")
    builder.addInitializedInputTensor(transposed, "transposed_input")
    graph = onnx.load_model_from_string(builder.getModelProto()).graph
    stored = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    np.testing.assert_array_equal(stored["contiguous_input"], plain)
    np.testing.assert_array_equal(stored["transposed_input"], transposed)


@pytest.mark.follows("test_np_memory_layout_add_constant")
def test_np_memory_layout_add_constant():
    value = _transposed((2, 2))
    builder = popart.Builder()
    out = builder.aiOnnx.identity([builder.aiOnnx.constant(value)])
    session = _identity_session(builder, out)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({}, anchors))
    np.testing.assert_array_equal(anchors[out], value)


def _input_identity():
    builder = popart.Builder()
    x = builder.addInputTensor("INT32", [2, 2])
    out = builder.aiOnnx.identity([x])
    return x, out, _identity_session(builder, out)


@pytest.mark.follows("test_np_memory_layout_add_input_tensor_pystepio")
def test_np_memory_layout_add_input_tensor_pystepio():
    x, _, session = _input_identity()
    anchors = session.initAnchorArrays()
    with pytest.raises(popart.popart_exception) as e_info:
        session.run(popart.PyStepIO({x: _transposed((2, 2))}, anchors))
    assert "contiguous" in e_info.value.args[0]


@pytest.mark.follows("test_np_memory_layout_add_input_tensor_pystepiocallback")
@pytest.mark.parametrize("transposed_input", [True, False])
def test_np_memory_layout_add_input_tensor_pystepiocallback(transposed_input):
    _, _, session = _input_identity()
    value = _transposed((2, 2)) if transposed_input else np.zeros((2, 2), np.int32)
    output = np.zeros((2, 2), np.int32) if transposed_input else _transposed((2, 2))
    stepio = popart.PyStepIOCallback(
        lambda _id, _prefetch: value, lambda _id: None, lambda _id: output, lambda _id: None
    )
    with pytest.raises(popart.popart_exception) as e_info:
        session.run(stepio)
    assert "contiguous" in e_info.value.args[0]
