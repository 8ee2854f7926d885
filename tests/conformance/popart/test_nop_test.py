"""graphcore/popart tests/integration/nop_test.py: ai.graphcore Nop passes its input through,
in a session and in the Builder's shape inference (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_basic")
def test_basic():
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT", [3])
    i1, i2 = builder.addInputTensor(shape), builder.addInputTensor(shape)
    p1 = builder.aiGraphcore.nop([builder.aiOnnx.add([i1, i2])])
    o = builder.aiGraphcore.nop([builder.aiOnnx.add([i1, p1])])
    builder.addOutputTensor(o)
    opts = popart.SessionOptions()
    opts.enableOutlining = False
    opts.enableOutliningCopyCostPruning = False
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        userOptions=opts,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    inputs = {i1: np.array([1.0, 2.0, 3.0], np.float32), i2: np.array([4.0, 5.0, 6.0], np.float32)}
    session.run(popart.PyStepIO(inputs, anchors))
    np.testing.assert_array_equal(anchors[o], np.array([6.0, 9.0, 12.0], np.float32))


@pytest.mark.follows("test_builder_shape_inference")
def test_builder_shape_inference():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]))
    n1 = builder.aiGraphcore.nop([i1])
    builder.addOutputTensor(builder.aiOnnx.mul([n1, i1]))
    assert builder.getTensorShape(n1) == [3]
