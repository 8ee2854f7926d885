"""graphcore/popart tests/integration/collectives_test.py: replicated all-reduce and
reduce-scatter of a weight across replicas (whole, and in replica groups with per-group
variable settings), and the comm-group attribute the builder records on collectives. The
original runs them on IPU hardware; here on emulated IPUs."""

import numpy as np
import pytest

import popart


def _device(num_ipus):
    return popart.DeviceManager().createIpuModelDevice({"numIPUs": num_ipus, "tilesPerIPU": 4})


def _infer(proto, anchor, replicas):
    options = popart.SessionOptions()
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = replicas
    with _device(replicas) as device:
        session = popart.InferenceSession(
            fnModel=proto,
            dataFlow=popart.DataFlow(1, {anchor: popart.AnchorReturnType("All")}),
            userOptions=options,
            deviceInfo=device,
        )
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({}, anchors))
    return anchors[anchor]


@pytest.mark.follows("test_replicated_allreduce")
def test_replicated_allreduce():
    data = np.arange(10, dtype=np.float32)
    builder = popart.Builder()
    weight = builder.addInitializedInputTensor(data, "input")
    out = builder.aiGraphcore.replicatedallreduce([weight])
    builder.addOutputTensor(out)
    result = _infer(builder.getModelProto(), out, 2)
    assert result.shape == (2, 10)
    for replica in range(2):
        np.testing.assert_allclose(result[replica], 2.0 * data)


@pytest.mark.follows("test_replicated_reducescatter")
@pytest.mark.parametrize(
    "comm_group, use_variable_settings",
    [
        (None, False),
        (popart.CommGroup(popart.CommGroupType.Consecutive, 2), False),
    ],
)
def test_replicated_reducescatter(comm_group, use_variable_settings):
    _reduce_scatter(comm_group, use_variable_settings)


@pytest.mark.follows("test_replicated_reducescatter")
def test_replicated_reducescatter_grouped_variable():
    _reduce_scatter(popart.CommGroup(popart.CommGroupType.Consecutive, 2), True)


def _reduce_scatter(comm_group, use_variable_settings):
    replicas = 4
    groups, replicas_per_group, shards = 1, replicas, replicas
    if comm_group is not None:
        shards = replicas // comm_group.replicaGroupSize
        if use_variable_settings:
            groups = comm_group.replicaGroupSize
            replicas_per_group = replicas // groups
    data = np.arange(12 * groups, dtype=np.float32)
    builder = popart.Builder()
    if use_variable_settings:
        data = data.reshape(groups, -1)
        settings = popart.VariableSettings(comm_group)
        builder.embedReplicationFactor(replicas)
    else:
        settings = popart.VariableSettings()
    weight = builder.addInitializedInputTensor(data, settings, "input")
    out = builder.aiGraphcore.replicatedreducescatter([weight], commGroup=comm_group)
    builder.addOutputTensor(weight)
    builder.addOutputTensor(out)
    result = _infer(builder.getModelProto(), out, replicas)

    # Each replica holds its shard of the sum over the replicas of its group (whose
    # members hold the same value).
    expected = shards * data.reshape(groups, shards, -1)
    for group in range(groups):
        for member in range(replicas_per_group):
            np.testing.assert_allclose(
                result[group * replicas_per_group + member].flatten(),
                expected[group][member % shards].flatten(),
            )


@pytest.mark.follows("test_gcl_comm_group_attrs")
def test_gcl_comm_group_attrs():
    builder = popart.Builder()
    weight = builder.addInitializedInputTensor(np.arange(10, dtype=np.float32), "input")
    o1 = builder.aiGraphcore.replicatedallreduce(
        [weight], commGroup=popart.CommGroup(popart.CommGroupType.All, 4)
    )
    with builder.commGroup(popart.CommGroupType.Consecutive, 4):
        o2 = builder.aiGraphcore.replicatedallreduce([weight])
    with builder.commGroup(popart.CommGroupType.Orthogonal, 4):
        o3 = builder.aiGraphcore.replicatedallreduce([weight])
    for out in (o1, o2, o3):
        builder.addOutputTensor(out)
    for out, group_type in ((o2, popart.CommGroupType.Consecutive),
                            (o3, popart.CommGroupType.Orthogonal)):  # fmt: skip
        assert "__collectiveCommGroup" in builder.getAllNodeAttributeNames({out})
        attribute = builder.getInt64VectorNodeAttribute("__collectiveCommGroup", {out})
        assert attribute == [int(group_type), 4]
