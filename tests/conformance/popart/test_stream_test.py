"""graphcore/popart tests/integration/stream_test.py: anchoring the input streams themselves
returns the values fed, unchanged (float16, Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_stream_on_off")
def test_stream_on_off():
    builder = popart.Builder()
    info = popart.TensorInfo("FLOAT16", [2])
    i1 = builder.addInputTensor(info)
    i2 = builder.addInputTensor(info)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {t: popart.AnchorReturnType("All") for t in (i1, i2, o)}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    a = np.array([1.0, 3.0], dtype=np.float16)
    b = np.array([7.0, 8.0], dtype=np.float16)
    session.run(popart.PyStepIO({i1: a, i2: b}, anchors))
    np.testing.assert_array_equal(anchors[i1], a)
    np.testing.assert_array_equal(anchors[i2], b)
    np.testing.assert_array_equal(anchors[o], a + b)
