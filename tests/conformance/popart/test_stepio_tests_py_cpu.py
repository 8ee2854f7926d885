"""graphcore/popart tests/integration/stepio_tests/stepio_tests_py_cpu.py: on the Cpu device,
a PyStepIO of buffers and a PyStepIOCallback (each batch handed over, and each anchor batch
taken back, through callbacks) feed two batches per step; a stepIO that feeds a tensor the
model does not take as an input fails when the session runs (not when it is made)."""

import numpy as np
import pytest

import popart

BATCHES = 2


def _adder_session():
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT", [2])
    i1, i2 = builder.addInputTensor(shape), builder.addInputTensor(shape)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    data_flow = popart.DataFlow(BATCHES, {t: popart.AnchorReturnType("All") for t in (i1, i2, o)})
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=data_flow,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    return session, session.initAnchorArrays(), (i1, i2, o)


@pytest.mark.follows("test_stepio_bufferinput")
def test_stepio_bufferinput():
    session, anchors, (i1, i2, o) = _adder_session()
    inputs = {i: np.random.rand(BATCHES, 2).astype(np.float32) for i in (i1, i2)}
    session.run(popart.PyStepIO(inputs, anchors))
    np.testing.assert_allclose(anchors[i1], inputs[i1])
    np.testing.assert_allclose(anchors[o], inputs[i1] + inputs[i2], rtol=1e-6)


@pytest.mark.follows("test_stepio_callbackinput")
def test_stepio_callbackinput():
    session, anchors, (i1, i2, o) = _adder_session()
    inputs = {i: np.random.rand(BATCHES, 2).astype(np.float32) for i in (i1, i2)}
    fed = dict.fromkeys((i1, i2), 0)
    returned = dict.fromkeys((i1, i2, o), 0)
    completed: list[str] = []

    def input_callback(tensor_id, _prefetch):
        fed[tensor_id] += 1
        return inputs[tensor_id][fed[tensor_id] - 1]

    def output_callback(tensor_id):
        returned[tensor_id] += 1
        return anchors[tensor_id][returned[tensor_id] - 1]

    session.run(
        popart.PyStepIOCallback(input_callback, completed.append, output_callback, completed.append)
    )
    assert fed == dict.fromkeys((i1, i2), BATCHES)
    assert returned == dict.fromkeys((i1, i2, o), BATCHES)
    # Every batch handed over or taken back is completed.
    assert sorted(completed) == sorted([i1, i2] * BATCHES + [i1, i2, o] * BATCHES)
    # Streamed inputs written back to the host come back unchanged.
    np.testing.assert_allclose(anchors[i1], inputs[i1])
    np.testing.assert_allclose(anchors[i2], inputs[i2])
    np.testing.assert_allclose(anchors[o], inputs[i1] + inputs[i2], rtol=1e-6)


@pytest.mark.follows("test_steio_correct_inputs")
def test_steio_correct_inputs():
    builder = popart.Builder()
    in0 = builder.addInputTensor("FLOAT", [4])
    sqrt = builder.aiOnnx.sqrt([in0])
    data = np.array([1, 4, 9, 16], np.float32)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        dataFlow=popart.DataFlow(1, [sqrt]),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    # Making a stepIO with an unknown name is allowed; running with a non-input fails.
    popart.PyStepIO({in0: data, "foo": np.zeros(4)}, anchors)
    stepio = popart.PyStepIO({in0: data, sqrt: np.zeros(4)}, anchors)
    with pytest.raises(popart.popart_exception) as error:
        session.run(stepio)
    # willow/src/stepio_size_assertion.cpp, throwIncorrectInput.
    assert error.value.args[0].startswith(
        f"The tensor '{sqrt}' has been provided as one of the inputs to the stepIO"
    )
    session.run(popart.PyStepIO({in0: data}, anchors))
    np.testing.assert_allclose(anchors[sqrt], np.sqrt(data))
