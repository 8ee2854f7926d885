"""graphcore/popart tests/integration/min_max_unwinding_test.py: an int32 input clamped by
Max and Min against constants, then gathered, compiles (the original only prepares the
session; here it also runs, against numpy) (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_min_max_unwinding")
def test_min_max_unwinding():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("INT32", [2, 4]))
    high = builder.aiOnnx.constant(np.array([19]).astype(np.int32))
    low = builder.aiOnnx.constant(np.array([0]).astype(np.int32))
    clamped = builder.aiOnnx.min([builder.aiOnnx.max([x, high]), low])
    out = builder.aiOnnx.gather([clamped, builder.aiOnnx.constant(np.array([1], np.int32))])
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createCpuDevice(),
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    data = np.arange(-8, 32, 5, dtype=np.int32).reshape(2, 4)
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_array_equal(anchors[out], np.minimum(np.maximum(data, 19), 0)[[1]])
