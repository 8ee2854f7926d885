"""graphcore/popart tests/integration/recompute_tests/implicit_recompute_regression_test.py:
a training session whose loss is scaled after an L1 loss, with a recomputed MatMul,
compiles (the original's regression: the recomputed op taken for a post-loss one) (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_implicit_recompute_op_scheduled_pre_loss_no")
def test_implicit_recompute_op_scheduled_pre_loss_no():
    builder = popart.Builder()
    t0 = builder.addInputTensor("FLOAT", [2, 2])
    w = np.random.rand(2, 2).astype(np.float32)
    t1 = builder.addInitializedInputTensor(w)
    t2 = builder.aiOnnx.matmul([t0, t1])
    t3 = builder.aiGraphcore.l1loss([t2], 0.1)
    t5 = builder.aiOnnx.constant(np.array([4]).astype(np.float32))
    t6 = builder.aiOnnx.mul([t3, t5])
    builder.recomputeOutputInBackwardPass(t2)
    session = popart.TrainingSession(
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [t6]),
        loss=t6,
        optimizer=popart.SGD({"lossScaling": (2.0, False)}),
    )
    session.prepareDevice()
    # (Beyond the original, which only compiles) one step's loss: 4 * 0.1 * mean|x @ w|.
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    x = np.random.rand(2, 2).astype(np.float32)
    session.run(popart.PyStepIO({t0: x}, anchors))
    np.testing.assert_allclose(anchors[t6], 0.4 * np.mean(np.abs(x @ w)), rtol=1e-5)
