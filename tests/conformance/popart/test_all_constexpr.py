"""graphcore/popart tests/integration/all_constexpr.py: a model of Constants only, folded by
the original, runs and gives their sum (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_all_constexpr")
def test_all_constexpr():
    datas = [np.random.rand(2, 2).astype(np.float32) for _ in range(4)]
    builder = popart.Builder()
    consts = [builder.aiOnnx.constant(data) for data in datas]
    out = builder.aiOnnx.add([builder.aiOnnx.add(consts[0:2]), builder.aiOnnx.add(consts[2:4])])
    builder.addOutputTensor(out)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        patterns=popart.Patterns(popart.PatternsLevel.All),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({}, anchors))
    assert anchors[out].shape == (2, 2)
    np.testing.assert_allclose(anchors[out], sum(datas), rtol=1e-6)
