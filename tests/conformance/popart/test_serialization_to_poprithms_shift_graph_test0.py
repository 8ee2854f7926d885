"""graphcore/popart tests/integration/scheduling_tests/serialization_to_poprithms_shift_graph_test0.py:
with `SessionOptions.serializedPoprithmsShiftGraphsDir` set, preparing a session writes the
graph its scheduler orders as JSON files into that directory."""

import json
import os

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_add_serialization")
def test_add_serialization(tmp_path):
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT", [2])
    i1, i2 = builder.addInputTensor(shape), builder.addInputTensor(shape)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    opts = popart.SessionOptions()
    opts.serializedPoprithmsShiftGraphsDir = str(tmp_path)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        userOptions=opts,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    jsons = sorted(os.listdir(tmp_path))
    assert len(jsons) > 0 and all(name.endswith(".json") for name in jsons)
    for name in jsons:
        json.loads((tmp_path / name).read_text())
    # The session still computes as it would without the files.
    anchors = session.initAnchorArrays()
    data = {i1: np.array([1.0, 2.0], np.float32), i2: np.array([3.0, 5.0], np.float32)}
    session.run(popart.PyStepIO(data, anchors))
    np.testing.assert_allclose(anchors[o], data[i1] + data[i2])
