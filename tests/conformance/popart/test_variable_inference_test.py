"""graphcore/popart tests/integration/variable_inference_test.py: an input added to a weight
in float32 and float16 (Cpu)."""

import numpy as np
import pytest

import popart


def _add_to_variable(np_type):
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo(np_type, [2]))
    i2 = builder.addInitializedInputTensor(np.array([2.0, 4.0], dtype=np_type))
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({i1: np.array([1.0, 3.0], dtype=np_type)}, anchors))
    assert anchors[o].dtype == np_type
    np.testing.assert_array_equal(anchors[o], np.array([3.0, 7.0], dtype=np_type))


@pytest.mark.follows("test_add_variable_fp32")
def test_add_variable_fp32():
    _add_to_variable(np.float32)


@pytest.mark.follows("test_add_variable_fp16")
def test_add_variable_fp16():
    _add_to_variable(np.float16)
