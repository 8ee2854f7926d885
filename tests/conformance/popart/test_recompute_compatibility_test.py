"""graphcore/popart tests/integration/recompute_compatibility_test.py: a training session
refuses automatic recomputation together with an op the user marked for recomputation
(Cpu)."""

import numpy as np
import pytest

import popart


def _session(auto):
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    r1 = builder.aiOnnx.relu([i1])
    o = builder.aiOnnx.relu([r1])
    builder.recomputeOutputInBackwardPass(r1)
    options = popart.SessionOptions()
    options.autoRecomputation = auto
    return popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [o, popart.reservedGradientPrefix() + i1]),
        optimizer=popart.ConstSGD(0.001),
        loss=o,
        patterns=popart.Patterns([]).enableRuntimeAsserts(False),
        userOptions=options,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    ), (i1, o)


@pytest.mark.follows("test_valid_recompute_options")
def test_valid_recompute_options():
    with pytest.raises(popart.popart_exception) as error:
        _session(popart.RecomputationType.Standard)
    assert error.value.args[0] == "A mixture of auto and manual recomputation is not supported"
    # (Beyond the original) the manual recomputation alone trains: relu(relu(x)) and its
    # gradient, as numpy has them.
    session, (i1, o) = _session(popart.RecomputationType.NoRecompute)
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({i1: np.array([2.0], np.float32)}, anchors))
    np.testing.assert_array_equal(anchors[o], [2.0])
    np.testing.assert_array_equal(anchors[popart.reservedGradientPrefix() + i1], [1.0])
