"""A replicated training program with a weight grouped over the replicas (VariableSettings
with a CommGroup): each group of replicas holds and trains its own value, given and read
with a leading group axis, while a shared weight trains on every replica's gradients.
Checked against numpy training each group on its own replicas' batches."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

import popart

REPLICAS = 4
LEARNING_RATE = 0.05


def _members(kind: str) -> list[list[int]]:
    # CommGroup(kind, 2) over 4 replicas: Consecutive {0, 1}, {2, 3}; Orthogonal {0, 2}, {1, 3}.
    return [[0, 1], [2, 3]] if kind == "Consecutive" else [[0, 2], [1, 3]]


def _reference(w, b, x, members, accumulation):
    """numpy SGD: loss = sum((x @ w_group + b)^2) per replica and micro-batch; each group's
    weight sums its replicas' gradients, the bias every replica's, over each update's
    micro-batches (x is [steps, accumulation, replicas, batch, 4])."""
    w, b = w.astype(np.float64), b.astype(np.float64)
    group_of = {r: g for g, group in enumerate(members) for r in group}
    outputs = np.zeros(x.shape[:3] + (x.shape[3], w.shape[-1]))
    for step in range(x.shape[0]):
        grad_w, grad_b = np.zeros_like(w), np.zeros_like(b)
        for micro in range(accumulation):
            for replica in range(REPLICAS):
                xr = x[step, micro, replica].astype(np.float64)
                out = xr @ w[group_of[replica]] + b
                outputs[step, micro, replica] = out
                grad_w[group_of[replica]] += xr.T @ (2 * out)
                grad_b += (2 * out).sum(axis=0)
        w, b = w - LEARNING_RATE * grad_w, b - LEARNING_RATE * grad_b
    return w, b, outputs


@pytest.mark.parametrize(
    "kind, retrieval, accumulation",
    [
        ("Consecutive", popart.VariableRetrievalMode.OnePerGroup, 1),
        ("Orthogonal", popart.VariableRetrievalMode.AllReplicas, 2),
    ],
)
def test_groups_train_their_own_weights(kind, retrieval, accumulation):
    rng = np.random.default_rng(7)
    w_host = rng.normal(size=(2, 4, 3)).astype(np.float32) * 0.3
    b_host = rng.normal(size=(3,)).astype(np.float32) * 0.1
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
    group = popart.CommGroup(getattr(popart.CommGroupType, kind), 2)
    w = builder.addInitializedInputTensor(w_host, popart.VariableSettings(group, retrieval), "w")
    b = builder.addInitializedInputTensor(b_host, "b")
    out = builder.aiOnnx.add([builder.aiOnnx.matmul([x, w]), b])
    loss = builder.aiOnnx.reducesumsquare([out], keepdims=0)
    assert builder.getTensorShape(w) == [2, 4, 3]

    options = popart.SessionOptions()
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = REPLICAS
    if accumulation > 1:
        options.enableGradientAccumulation = True
        options.accumulationFactor = accumulation
    steps = 2
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(steps, {out: popart.AnchorReturnType("All")}),
        loss=loss,
        optimizer=popart.SGD({"defaultLearningRate": (LEARNING_RATE, False)}),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": REPLICAS}),
        userOptions=options,
    )
    # Each replica's graph sees its group's row.
    assert session.getInfo(w).shape() == [4, 3]
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    data = rng.normal(size=(steps, accumulation, REPLICAS, 2, 4)).astype(np.float32)
    feed = data if accumulation > 1 else data[:, 0]
    session.run(popart.PyStepIO({x: feed}, anchors))

    members = _members(kind)
    expected_w, expected_b, expected_out = _reference(w_host, b_host, data, members, accumulation)
    got_out = anchors[out].reshape(expected_out.shape)
    np.testing.assert_allclose(got_out, expected_out, rtol=1e-4, atol=1e-5)

    copies = REPLICAS if retrieval == popart.VariableRetrievalMode.AllReplicas else 2
    read_w = np.zeros((copies, 4, 3), np.float32)
    read_b = np.zeros_like(b_host)
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO({w: read_w, b: read_b}))
    np.testing.assert_allclose(read_b, expected_b, rtol=1e-4, atol=1e-5)
    if copies == 2:
        np.testing.assert_allclose(read_w, expected_w, rtol=1e-4, atol=1e-5)
    else:
        # One copy per replica: its group's value.
        for g, group in enumerate(members):
            for replica in group:
                np.testing.assert_allclose(read_w[replica], expected_w[g], rtol=1e-4, atol=1e-5)
    assert not np.allclose(read_w[0], read_w[-1])


def test_writing_grouped_weights_reaches_each_group():
    """writeWeights takes one value per group; inference reads each replica's group's."""
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    group = popart.CommGroup(popart.CommGroupType.Orthogonal, 2)
    w = builder.addInitializedInputTensor(
        np.zeros((2, 3), np.float32), popart.VariableSettings(group), "w"
    )
    out = builder.aiOnnx.mul([x, w])
    options = popart.SessionOptions()
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = REPLICAS
    options.constantWeights = False  # writeWeights needs weights the host can write
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createIpuModelDevice({"numIPUs": REPLICAS}),
        userOptions=options,
    )
    session.prepareDevice()
    values = np.array([[1, 2, 3], [10, 20, 30]], np.float32)
    session.writeWeights(popart.PyWeightsIO({w: values}))
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: np.ones((REPLICAS, 3), np.float32)}, anchors))
    # Orthogonal groups of 2 over 4 replicas: {0, 2} and {1, 3}.
    np.testing.assert_allclose(anchors[out], values[[0, 1, 0, 1]])


def test_host_value_without_the_group_axis_is_refused():
    builder = popart.Builder()
    group = popart.CommGroup(popart.CommGroupType.Consecutive, 2)
    w = builder.addInitializedInputTensor(
        np.zeros((3, 3), np.float32), popart.VariableSettings(group), "w"
    )
    out = builder.aiOnnx.relu([w])
    options = popart.SessionOptions()
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = REPLICAS
    with pytest.raises(popart.popart_exception, match="should match numGroups: 2"):
        popart.InferenceSession(
            builder.getModelProto(),
            popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
            popart.DeviceManager().createIpuModelDevice({"numIPUs": REPLICAS}),
            userOptions=options,
        )


def test_optimizer_state_is_grouped_and_the_accumulator_is_not(tmp_path):
    """The original adds a grouped weight's optimizer state with the weight's settings, so
    with a leading group axis (Adam's Accl1___/Accl2___ and its step count), but the
    gradient accumulator Accum___ with default settings: one replica's shape, each replica
    its own (willow/src/patterns/adamdecompose.cpp, optimizerdecompose.cpp addStateTensor).
    Group 1's weight is twice group 0's and the loss quadratic, so its gradient is twice
    group 0's: its first moment twice, its second four times."""
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
    group = popart.CommGroup(popart.CommGroupType.Consecutive, 2)
    w_host = np.stack([np.ones((4, 3)), 2 * np.ones((4, 3))]).astype(np.float32)
    w = builder.addInitializedInputTensor(w_host, popart.VariableSettings(group), "w")
    out = builder.aiOnnx.matmul([x, w])
    loss = builder.aiOnnx.reducesumsquare([out], keepdims=0)
    options = popart.SessionOptions()
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = REPLICAS
    options.enableGradientAccumulation = True
    options.accumulationFactor = 2
    accum = popart.reservedAccumPrefix() + w
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {accum: popart.AnchorReturnType("Final")}),
        loss=loss,
        optimizer=popart.Adam({"defaultLearningRate": (1e-3, False)}),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": REPLICAS}),
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: np.ones((2, REPLICAS, 2, 4), np.float32)}, anchors))
    assert anchors[accum].shape == (REPLICAS, 4, 3)

    path = str(tmp_path / "model.onnx")
    session.modelToHost(path)
    saved = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    accl1 = saved[popart.reservedAccl1Prefix() + w]
    accl2 = saved[popart.reservedAccl2Prefix() + w]
    assert accl1.shape == accl2.shape == (2, 4, 3)
    assert saved[popart.reservedStepPrefix() + w].shape == (2,)
    assert np.all(accl1[0] != 0)
    np.testing.assert_allclose(accl1[1], 2 * accl1[0], rtol=1e-5)
    np.testing.assert_allclose(accl2[1], 4 * accl2[0], rtol=1e-5)


def test_sgd1_velocity_of_a_grouped_weight_is_not_grouped(tmp_path):
    """SGD1 (Combined mode, with momentum) adds Accl___ with the weight gradient's shape and
    default variable settings (willow/src/patterns/sgd1decompose.cpp, addAcclInTensor), so a
    grouped weight's Accl___ has one replica's shape; SGD2's Accl1___ (Separate mode) is
    grouped as the weight (sgd2decompose.cpp)."""
    shapes = {}
    for mode in (
        popart.SGDAccumulatorAndMomentum.Combined,
        popart.SGDAccumulatorAndMomentum.Separate,
    ):
        builder = popart.Builder()
        x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
        group = popart.CommGroup(popart.CommGroupType.Consecutive, 2)
        w_host = np.stack([np.ones((4, 3)), 2 * np.ones((4, 3))]).astype(np.float32)
        w = builder.addInitializedInputTensor(w_host, popart.VariableSettings(group), "w")
        loss = builder.aiOnnx.reducesumsquare([builder.aiOnnx.matmul([x, w])], keepdims=0)
        options = popart.SessionOptions()
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = REPLICAS
        sgd = popart.SGD(
            {"defaultLearningRate": (1e-3, False), "defaultMomentum": (0.9, False)},
            accumulatorAndMomentum=mode,
        )
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, [loss]),
            loss=loss,
            optimizer=sgd,
            deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": REPLICAS}),
            userOptions=options,
        )
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({x: np.ones((REPLICAS, 2, 4), np.float32)}, anchors))
        path = str(tmp_path / f"model_{mode}.onnx")
        session.modelToHost(path)
        saved = {t.name: list(t.dims) for t in onnx.load(path).graph.initializer}
        shapes[mode] = saved
        # The weights still train: group 1's weight (twice group 0's) moved, and further.
        trained = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
        assert np.all(trained[w] < w_host)
    combined = shapes[popart.SGDAccumulatorAndMomentum.Combined]
    separate = shapes[popart.SGDAccumulatorAndMomentum.Separate]
    assert combined[popart.reservedAcclPrefix() + "w"] == [4, 3]
    assert separate[popart.reservedAccl1Prefix() + "w"] == [2, 4, 3]
