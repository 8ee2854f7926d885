"""graphcore/popart tests/integration/streammode_tests/grouped_initialization_test.py:
variables whose VariableSettings group the replicas (a CommGroup: each group of replicas
holds its own value, given on the host with a leading group axis), initialized, trained,
read back, checkpointed to ONNX and kept off chip or sharded. openipu does not yet give each
replica its group's value (every replica holds the whole host array), so these are expected
failures naming that difference. The original runs them on IPU hardware."""

import numpy as np
import pytest

import popart

GROUPED = (
    "openipu gives every replica the whole host value of a variable with grouped "
    "VariableSettings (CommGroup Consecutive 2), not its group's slice"
)
REPLICAS = 4


def _per_replica_values(location=None, train=False):
    group = popart.CommGroup(popart.CommGroupType.Consecutive, 2)
    groups = REPLICAS // 2
    host = np.arange(groups * 3, dtype=np.float32).reshape(groups, 3)
    builder = popart.Builder()
    builder.embedReplicationFactor(REPLICAS)
    w = builder.addInitializedInputTensor(host, popart.VariableSettings(group), "w")
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]))
    out = builder.aiOnnx.add([w, x])
    builder.addOutputTensor(out)
    opts = popart.SessionOptions()
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = REPLICAS
    if location is not None:
        opts.weightTensorLocationSettings = popart.TensorLocationSettings(location, 0, 0)
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": REPLICAS, "tilesPerIPU": 4})
    data_flow = popart.DataFlow(1, {out: popart.AnchorReturnType("All")})
    if train:
        loss = builder.aiGraphcore.l1loss([out], 0.1)
        session = popart.TrainingSession(
            builder.getModelProto(), data_flow, loss, popart.ConstSGD(0.0), device,
            userOptions=opts,
        )  # fmt: skip
    else:
        session = popart.InferenceSession(
            builder.getModelProto(), data_flow, device, userOptions=opts
        )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: np.zeros((REPLICAS, 3), np.float32)}, anchors))
    # Replicas 0 and 1 hold group 0's value, replicas 2 and 3 group 1's.
    np.testing.assert_allclose(anchors[out], np.repeat(host, 2, axis=0))
    return session, w, host


@pytest.mark.follows("test_grouped_initialization")
@pytest.mark.parametrize("train", [False, True])
@pytest.mark.xfail(strict=True, reason=GROUPED)
def test_grouped_initialization(train):
    session, w, host = _per_replica_values(train=train)
    read = {w: np.zeros_like(host)}
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO(read))
    np.testing.assert_allclose(read[w], host)


@pytest.mark.follows("test_onnx_checkpointing")
@pytest.mark.xfail(strict=True, reason=GROUPED)
def test_onnx_checkpointing(tmp_path):
    import onnx
    from onnx import numpy_helper

    session, w, host = _per_replica_values(train=True)
    session.modelToHost(str(tmp_path / "model.onnx"))
    saved = {
        t.name: numpy_helper.to_array(t)
        for t in onnx.load(str(tmp_path / "model.onnx")).graph.initializer
    }
    np.testing.assert_allclose(saved[w], host)


@pytest.mark.follows("test_locations")
@pytest.mark.xfail(strict=True, reason=GROUPED)
def test_locations():
    for location in (
        popart.TensorLocation(popart.TensorStorage.OffChip, popart.ReplicatedTensorSharding.Off),
        popart.TensorLocation(popart.TensorStorage.OffChip, popart.ReplicatedTensorSharding.On),
    ):
        _per_replica_values(location=location)
