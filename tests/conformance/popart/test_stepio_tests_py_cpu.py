"""graphcore/popart tests/integration/stepio_tests/stepio_tests_py_cpu.py: on the Cpu device,
a PyStepIO of buffers and a PyStepIOCallback (each batch handed over, and each anchor batch
taken back, through callbacks) feed two batches per step; a stepIO that feeds a tensor the
model does not take as an input fails when the session runs (not when it is made)."""

import numpy as np
import pytest
from popart_stepio_checks import check_buffer_input, check_callback_input

import popart


def _cpu():
    return popart.DeviceManager().createCpuDevice()


@pytest.mark.follows("test_stepio_bufferinput")
def test_stepio_bufferinput():
    check_buffer_input(_cpu())


@pytest.mark.follows("test_stepio_callbackinput")
def test_stepio_callbackinput():
    check_callback_input(_cpu())


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
