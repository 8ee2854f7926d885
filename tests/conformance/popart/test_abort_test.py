"""graphcore/popart tests/integration/abort_test.py: the ai.graphcore Abort op ends the run
with a poplar_runtime_error ("Abort Program") when it has no condition or its condition is
non-zero, and lets the run finish when the condition is zero. The original runs them on
IPU hardware; here on an emulated IPU."""

import numpy as np
import pytest

import popart


def _session(value, conditional):
    builder = popart.Builder()
    t = builder.addInitializedInputTensor(np.asarray(value, np.float32), "input")
    o = builder.aiOnnx.abs([t])
    builder.aiGraphcore.abort([o] if conditional else [])
    builder.addOutputTensor(o)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        userOptions=popart.SessionOptions(),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": 4}),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    return session, anchors, o


@pytest.mark.follows("test_abort_unconditional")
def test_abort_unconditional():
    session, anchors, _ = _session(np.arange(10), conditional=False)
    with pytest.raises(popart.poplar_runtime_error, match="^Abort Program"):
        session.run(popart.PyStepIO({}, anchors))


@pytest.mark.follows("test_abort_conditional")
def test_abort_conditional():
    session, anchors, o = _session([0], conditional=True)
    session.run(popart.PyStepIO({}, anchors))
    np.testing.assert_array_equal(anchors[o], [0.0])


@pytest.mark.follows("test_abort_conditional_exception")
def test_abort_conditional_exception():
    session, anchors, _ = _session([1], conditional=True)
    with pytest.raises(popart.poplar_runtime_error, match="^Abort Program"):
        session.run(popart.PyStepIO({}, anchors))
