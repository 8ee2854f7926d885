"""Tensor location settings resolved as the original's streaming-memory transform, the
replicated collectives' groups and reductions, Nll's clamped log, and the cost model's
accounting of off-chip and sharded variables."""

import logging

import numpy as np
import pytest
import tensorflow as tf

import popart
from openipu._src.engine.cost_model import memory
from openipu._src.engine.cost_model.chip import chip
from openipu._src.engine.cost_model.cost_options import CostOptions
from openipu._src.engine.cost_model.workload import Variable, VariableKind, Workload
from openipu._src.popart.builder.enums import CommGroupType
from openipu._src.popart.lowering.ops.ai_graphcore import _safe_negative_log
from openipu._src.popart.lowering.ops.collectives import replica_groups
from openipu._src.popart.session import tensor_locations


def _settings(storage, sharding=popart.ReplicatedTensorSharding.Off, off_chip=0, rts=2):
    return popart.TensorLocationSettings(
        location=popart.TensorLocation(storage=storage, replicatedTensorSharding=sharding),
        minElementsForOffChip=off_chip,
        minElementsForReplicatedTensorSharding=rts,
    )


def test_locations_follow_settings_sizes_and_overrides(caplog):
    opts = popart.SessionOptions()
    opts.weightTensorLocationSettings = _settings(
        popart.TensorStorage.OffChip, popart.ReplicatedTensorSharding.On, off_chip=10, rts=50
    )
    opts.optimizerStateTensorLocationSettings = _settings(popart.TensorStorage.OffChip)
    opts.tensorLocationSettingsOverride = {"W2": popart.TensorLocation(popart.TensorStorage.OnChip)}
    elements = {"W0": 100, "W1": 20, "W2": 100, "small": 4, "Accl1___W0": 100, "Accum___W0": 100}
    resolved = tensor_locations.resolve(opts, elements, replicas=2)
    assert resolved["W0"] == tensor_locations.ResolvedLocation(off_chip=True, sharded=True)
    assert resolved["W1"] == tensor_locations.ResolvedLocation(off_chip=True, sharded=False)
    assert resolved["W2"].off_chip is False  # the override wins
    assert resolved["small"].off_chip is False  # below minElementsForOffChip
    assert resolved["Accl1___W0"].off_chip is True
    assert resolved["Accum___W0"].off_chip is False  # accumulator settings: on chip
    with caplog.at_level(logging.WARNING, logger="popart"):
        alone = tensor_locations.resolve(opts, {"W0": 100}, replicas=1)
    assert alone["W0"].sharded is False
    assert "Unable to shard tensor W0 due to lack of replication" in caplog.text


def test_sgd1_combined_accumulator_follows_accumulating():
    opts = popart.SessionOptions()
    opts.accumulatorTensorLocationSettings = _settings(popart.TensorStorage.OffChip)
    assert not tensor_locations.resolve(opts, {"Accl___W": 9}, 1)["Accl___W"].off_chip
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 2
    assert tensor_locations.resolve(opts, {"Accl___W": 9}, 1)["Accl___W"].off_chip


def test_off_chip_and_sharded_variables_leave_the_tiles():
    workload = Workload(operations=(), variables=(
        Variable("W0:0", 1 << 20, VariableKind.WEIGHT, 0),
        Variable("replica_1/W1:0", 1 << 20, VariableKind.WEIGHT, 0),
    ))  # fmt: skip
    figures = chip("ipu2", 4)
    plain = memory.per_ipu(workload, figures, CostOptions(tiles=4))[0]
    moved = memory.per_ipu(
        workload, figures,
        CostOptions(tiles=4, remote_variables=("W0",), sharded_variables=("W1",),
                    sharding_replicas=4),
    )[0]  # fmt: skip
    assert plain.categories["weights"] == 2 << 20
    assert moved.categories["remote_buffers"] == 1 << 20
    assert moved.categories["weights"] == (1 << 20) // 4


@pytest.mark.parametrize(
    "group_type, size, expected",
    [
        (CommGroupType.All, 0, [[0, 1, 2, 3]]),
        (CommGroupType.Consecutive, 2, [[0, 1], [2, 3]]),
        (CommGroupType.Orthogonal, 2, [[0, 2], [1, 3]]),
        (CommGroupType.Ungrouped, 0, [[0], [1], [2], [3]]),
    ],
)
def test_replica_groups_as_commgroup_hpp(group_type, size, expected):
    assert replica_groups(group_type, size, 4) == expected


def _all_reduce(operator=None, comm_group=None, replicas=4):
    builder = popart.Builder()
    data = np.arange(3, dtype=np.float32)
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]))
    out = builder.aiGraphcore.replicatedallreduce(
        [x], collectiveOperator=operator, commGroup=comm_group
    )
    builder.addOutputTensor(out)
    opts = popart.SessionOptions()
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = replicas
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createIpuModelDevice({"numIPUs": replicas, "tilesPerIPU": 4}),
        userOptions=opts,
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    feed = np.stack([data + 10 * r for r in range(replicas)])  # replica r: data + 10r
    session.run(popart.PyStepIO({x: feed}, anchors))
    return anchors[out], feed


def test_all_reduce_max_in_orthogonal_groups():
    result, feed = _all_reduce(
        popart.CollectiveOperator.Max, popart.CommGroup(popart.CommGroupType.Orthogonal, 2)
    )
    for replica in range(4):
        np.testing.assert_allclose(result[replica], feed[replica % 2 + 2])


def test_all_reduce_mean_of_all():
    result, feed = _all_reduce(popart.CollectiveOperator.Mean)
    for replica in range(4):
        np.testing.assert_allclose(result[replica], feed.mean(axis=0))


def test_nll_log_is_clamped_as_the_original():
    p = tf.constant([0.0, 0.5], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(p)
        loss = _safe_negative_log(p)
    np.testing.assert_allclose(loss.numpy(), [-np.log(1e-7), -np.log(0.5)], rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(loss, p).numpy(), [-1e10, -2.0], rtol=1e-6)


def test_set_random_seed_without_randomness_is_ignored(caplog):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    out = builder.aiOnnx.relu([x])
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, [out]),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    with caplog.at_level(logging.WARNING, logger="popart"):
        session.setRandomSeed(3)  # before prepareDevice: no error, as the original
        assert session.getRandomSeed() == 0
    assert "no random behaviour" in caplog.text


def test_annotated_constant_keeps_its_value_for_shape_inference():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 4]))
    with builder.executionPhase(0), builder.virtualGraph(0):
        y = builder.reshape_const(builder.aiOnnx, [x], [2, 8])
    assert builder.getTensorShape(y) == [2, 8]
