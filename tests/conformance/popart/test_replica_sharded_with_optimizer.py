"""graphcore/popart tests/integration/replica_sharded_with_optimizer.py: a weight whose
VariableSettings give each of two replicas its own value (CommGroup Ungrouped; the host array
has a leading replica axis), trained one step with each optimizer. The original runs it on a
two-IPU IpuModel and checks that the weight's anchor has the host array's shape."""

import numpy as np
import pytest

import popart

REPLICAS = 2

OPTIMIZERS = {
    "ADAM_NO_BIAS": lambda: popart.Adam(
        {"defaultLearningRate": (0.1, True)}, mode=popart.AdamMode.AdamNoBias
    ),
    "ADAM_WITH_BIAS": lambda: popart.Adam(
        {"defaultLearningRate": (0.1, True)}, mode=popart.AdamMode.Adam
    ),
    "SGD_SEPARATE": lambda: popart.SGD(
        {"defaultLearningRate": (0.1, True), "defaultMomentum": (0.9, True)},
        accumulatorAndMomentum=popart.SGDAccumulatorAndMomentum.Separate,
    ),
    "SGD_COMBINED": lambda: popart.SGD(
        {"defaultLearningRate": (0.1, True), "defaultMomentum": (0.9, True)},
        accumulatorAndMomentum=popart.SGDAccumulatorAndMomentum.Combined,
    ),
}


@pytest.mark.follows("test_replica_sharded_with_optimizer")
@pytest.mark.parametrize("optimizer_name", sorted(OPTIMIZERS))
def test_replica_sharded_with_optimizer(optimizer_name):
    w_value = np.random.default_rng(0).random((REPLICAS, 3)).astype(np.float16)
    builder = popart.Builder()
    settings = popart.VariableSettings(
        popart.CommGroup(popart.CommGroupType.Ungrouped, 0),
        popart.VariableRetrievalMode.OnePerGroup,
    )
    w = builder.addInitializedInputTensor(w_value, settings, "w")
    loss = builder.aiOnnx.reducesumsquare([w])
    data_flow = popart.DataFlow(
        1, {w: popart.AnchorReturnType("ALL"), loss: popart.AnchorReturnType("ALL")}
    )
    opts = popart.SessionOptions()
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = REPLICAS
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": REPLICAS})
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        loss=loss,
        deviceInfo=device,
        optimizer=OPTIMIZERS[optimizer_name](),
        dataFlow=data_flow,
        userOptions=opts,
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.weightsFromHost()
    session.run(popart.PyStepIO({}, anchors))
    # Each replica's anchors hold its own row: the weight after the step's update (as
    # openipu anchors a trained weight), and its loss.
    assert anchors[w].shape == w_value.shape
    read = np.zeros_like(w_value)
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO({w: read}))
    np.testing.assert_allclose(anchors[w], read)
    np.testing.assert_allclose(
        anchors[loss].reshape(REPLICAS),
        (w_value.astype(np.float32) ** 2).sum(axis=1),
        rtol=1e-2,
    )
    if optimizer_name.startswith("SGD"):
        # Each replica trains its own row alone: gradient 2 w, first velocity the gradient.
        np.testing.assert_allclose(read, w_value * (1 - 0.1 * 2), rtol=2e-3)
    else:
        assert not np.allclose(read, w_value, atol=1e-2)
