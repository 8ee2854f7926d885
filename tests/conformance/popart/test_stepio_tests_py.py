"""graphcore/popart tests/integration/stepio_tests/stepio_tests_py.py: inputs fed by a
PyStepIO of buffers, and by a PyStepIOCallback that hands each batch over (and receives
each anchor batch) through callbacks, over two batches per step. The original runs them on
IPU hardware; here on an emulated IPU."""

import numpy as np
import pytest

import popart

BATCHES = 2


def _session():
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT", [2])
    i1, i2 = builder.addInputTensor(shape), builder.addInputTensor(shape)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    data_flow = popart.DataFlow(BATCHES, {t: popart.AnchorReturnType("All") for t in (i1, i2, o)})
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=data_flow,
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 1}),
    )
    session.prepareDevice()
    return session, session.initAnchorArrays(), (i1, i2, o)


@pytest.mark.follows("test_stepio_bufferinput_ipu")
def test_stepio_bufferinput_ipu():
    session, anchors, (i1, i2, o) = _session()
    inputs = {i: np.random.rand(BATCHES, 2).astype(np.float32) for i in (i1, i2)}
    session.run(popart.PyStepIO(inputs, anchors))
    np.testing.assert_allclose(anchors[o], inputs[i1] + inputs[i2], rtol=1e-6)


@pytest.mark.follows("test_stepio_callbackinput_ipu")
def test_stepio_callbackinput_ipu():
    session, anchors, (i1, i2, o) = _session()
    inputs = {i: np.random.rand(BATCHES, 2).astype(np.float32) for i in (i1, i2)}
    fed = {i1: 0, i2: 0}
    returned = {i1: 0, i2: 0, o: 0}

    def input_callback(tensor_id, prefetch):
        if prefetch or fed[tensor_id] >= BATCHES:
            return None
        fed[tensor_id] += 1
        return inputs[tensor_id][fed[tensor_id] - 1]

    def output_callback(tensor_id):
        returned[tensor_id] += 1
        return anchors[tensor_id][returned[tensor_id] - 1]

    stepio = popart.PyStepIOCallback(
        input_callback, lambda _: None, output_callback, lambda _: None
    )
    session.run(stepio)
    assert fed == {i1: BATCHES, i2: BATCHES}
    assert returned == {i1: BATCHES, i2: BATCHES, o: BATCHES}
    # The streamed inputs come back unchanged, and the sum is computed per batch.
    np.testing.assert_allclose(anchors[i1], inputs[i1])
    np.testing.assert_allclose(anchors[i2], inputs[i2])
    np.testing.assert_allclose(anchors[o], inputs[i1] + inputs[i2], rtol=1e-6)
