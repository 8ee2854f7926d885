"""graphcore/popart tests/integration/streammode_tests/grouped_initialization_test.py:
variables whose VariableSettings group the replicas (a CommGroup: each group of replicas
holds its own value, given on the host with a leading group axis), initialized, trained,
read back (one copy per group, or per replica with VariableRetrievalMode.AllReplicas),
checkpointed to ONNX and kept off chip or sharded. The original runs them on IPU hardware;
here on emulated IPUs, with fewer batches per step and steps (the checks are the same)."""

import numpy as np
import pytest

import popart

BATCHES_PER_STEP = 2
O_DIM, CHANNELS, DATA_LEN = 2, 2, 3
SHAPE = [O_DIM, CHANNELS, DATA_LEN, DATA_LEN]
LEARNING_RATE = 1.0

COMM = {
    "All": popart.CommGroupType.All,
    "Consecutive": popart.CommGroupType.Consecutive,
    "Orthogonal": popart.CommGroupType.Orthogonal,
    "None": popart.CommGroupType.Ungrouped,
}
RETRIEVAL = {
    "OnePerGroup": popart.VariableRetrievalMode.OnePerGroup,
    "AllReplicas": popart.VariableRetrievalMode.AllReplicas,
}

# The original's configurations: (index, replicas, comm group type, group size, retrieval).
# Its config 10 (4 replicas, Consecutive groups of 2, AllReplicas) repeats config 6's values;
# without the original's per-location runs (not ported here) it would run the same test twice.
CONFIGS = [
    (0, 1, "All", 0, "OnePerGroup"),
    (1, 2, "All", 0, "OnePerGroup"),
    (2, 2, "All", 0, "AllReplicas"),
    (3, 2, "None", 0, "OnePerGroup"),
    (4, 4, "Consecutive", 2, "OnePerGroup"),
    (5, 4, "Orthogonal", 2, "OnePerGroup"),
    (6, 4, "Consecutive", 2, "AllReplicas"),
    (7, 4, "Orthogonal", 2, "AllReplicas"),
    (8, 2, "Consecutive", 1, "OnePerGroup"),
    pytest.param((9, 16, "Orthogonal", 4, "AllReplicas"), marks=pytest.mark.slow),
]


def _settings(config):
    _, _, comm, size, retrieval = config
    return popart.VariableSettings(popart.CommGroup(COMM[comm], size), RETRIEVAL[retrieval])


def _group_members(config, settings, returned):
    """The replicas of each group (the original's get_group_idxs)."""
    _, replicas, comm, _, _ = config
    if comm == "All":
        return [list(range(replicas))]
    size = settings.getSharedVariableDomain().replicaGroupSize
    groups = returned if size == 0 else replicas // size
    step = size if comm == "Orthogonal" else 1
    return [
        list(range(settings.getGroupRepresentative(g), settings.getGroupRepresentative(g) + step * size, step))
        for g in range(groups)
    ]  # fmt: skip


def _weights_array(groups):
    shape = ([len(groups)] if len(groups) > 1 else []) + SHAPE
    return np.linspace(0, 1, int(np.prod(shape))).astype(np.float32).reshape(shape)


def _session(config, settings, groups, session_type, location=None, builder=None):
    replicas = config[1]
    builder = builder or popart.Builder()
    arrays_one = _weights_array([])
    arrays_two = _weights_array(groups)
    w1 = builder.addInitializedInputTensor(arrays_one)
    w2 = builder.addInitializedInputTensor(arrays_two, settings)
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", SHAPE), "main_input_123")
    a = builder.aiOnnx.matmul([ip, w1])
    b = builder.aiOnnx.matmul([a, w2])
    o = builder.reshape_const(builder.aiOnnx, [b], [O_DIM, CHANNELS * DATA_LEN * DATA_LEN])
    o = builder.aiOnnx.softmax([builder.aiOnnx.relu([o])])
    opts = popart.SessionOptions()
    opts.replicatedGraphCount = replicas
    opts.enableReplicatedGraphs = replicas != 1
    if location is not None:
        opts.weightTensorLocationSettings = location
    # Sixteen replicas' programs need more than the IPU model's default four tiles.
    tiles = 4 if replicas <= 4 else 64
    device = popart.DeviceManager().createIpuModelDevice(
        {"numIPUs": replicas, "tilesPerIPU": tiles}
    )
    training = session_type == "training"
    data_flow = popart.DataFlow(
        BATCHES_PER_STEP if training else 1, {o: popart.AnchorReturnType("All")}
    )
    if training:
        lb = builder.addInputTensor(popart.TensorInfo("INT32", [O_DIM]), "label_input_456")
        nll = builder.aiGraphcore.nllloss([o, lb])
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(), dataFlow=data_flow, userOptions=opts, loss=nll,
            deviceInfo=device, optimizer=popart.ConstSGD(LEARNING_RATE),
        )  # fmt: skip
    else:
        lb = None
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(), dataFlow=data_flow, userOptions=opts, deviceInfo=device
        )
    session.prepareDevice()
    prefix = ([BATCHES_PER_STEP] if training else []) + ([replicas] if replicas > 1 else [])
    return session, builder, (ip, lb, w1, w2), (arrays_one, arrays_two), prefix


def _verify(config, settings, weights, groups):
    """Different groups hold different values; with AllReplicas, a group's replicas the same."""
    every = settings.getRetrievalMode() == popart.VariableRetrievalMode.AllReplicas
    if config[2] == "All" and config[3] == 0 and not every:
        return
    for g in range(len(groups)):
        for g2 in range(g + 1, len(groups)):
            if every:
                assert not np.allclose(weights[groups[g][0]], weights[groups[g2][0]])
            else:
                assert not np.allclose(weights[g], weights[g2])
    if every:
        for group in groups:
            for member in group[1:]:
                np.testing.assert_allclose(weights[group[0]], weights[member])


@pytest.mark.follows("test_grouped_initialization")
@pytest.mark.parametrize("session_type", ["training", "inference"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"config{c[0]}")
def test_grouped_initialization(config, session_type):
    replicas = config[1]
    settings = _settings(config)
    returned = settings.numReplicasReturningVariable(replicas)
    if session_type == "inference" and returned == 1:
        pytest.skip("the original runs inference only where several copies come back")
    groups = [] if returned == 1 else _group_members(config, settings, returned)
    session, builder, tensors, arrays, prefix = _session(config, settings, groups, session_type)
    ip, lb, w1, w2 = tensors
    arrays_one, arrays_two = arrays
    every = config[4] == "AllReplicas"
    buffer_one = np.zeros(arrays_one.shape, np.float32)
    if every:
        buffer_two = np.zeros((len(groups) * len(groups[0]), *SHAPE), np.float32)
    else:
        buffer_two = np.zeros(arrays_two.shape, np.float32)
    weights_io = popart.PyWeightsIO({w1: buffer_one, w2: buffer_two})

    session.weightsFromHost()
    session.weightsToHost()
    session.readWeights(weights_io)
    if session_type == "training":
        np.testing.assert_allclose(buffer_one, arrays_one)
    if every:
        sample = range(0, buffer_two.shape[0], len(groups[0]))
        if config[2] == "Orthogonal":
            sample = range(0, len(groups[0]))
        _verify(config, settings, buffer_two, groups)
        np.testing.assert_allclose(buffer_two[sample].flatten(), arrays_two.flatten())
    else:
        sample = range(buffer_two.shape[0])
        np.testing.assert_allclose(buffer_two, arrays_two)
    if returned == 1:
        assert arrays_one.shape == buffer_two.shape
        assert builder.getTensorShape(w1) == builder.getTensorShape(w2)
    else:
        assert buffer_two.shape[0] == returned and buffer_two.shape[1:] == arrays_one.shape

    rng = np.random.default_rng(0)
    for step in range(2):
        feed = {ip: rng.random(prefix + SHAPE, dtype=np.float32)}
        if session_type == "training":
            # Labels of the model's classes (the original's are below 20, within its classes).
            feed[lb] = rng.integers(0, CHANNELS * DATA_LEN**2, prefix + [O_DIM]).astype(np.int32)
        session.run(popart.PyStepIO(feed, session.initAnchorArrays()))
        session.weightsToHost()
        session.readWeights(weights_io)
        if step == 0 and session_type == "training":
            assert not np.allclose(buffer_two[sample].reshape(arrays_two.shape), arrays_two)
        _verify(config, settings, buffer_two, groups)


@pytest.mark.follows("test_onnx_checkpointing")
@pytest.mark.parametrize("config", CONFIGS[1:6], ids=lambda c: f"config{c[0]}")
def test_onnx_checkpointing(config, tmp_path):
    replicas = config[1]
    settings = _settings(config)
    returned = settings.numReplicasReturningVariable(replicas)
    groups = [] if returned == 1 else _group_members(config, settings, returned)

    def buffers(array_one, array_two):
        one = np.ones(array_one.shape, np.float32)
        two = np.ones(array_two.shape, np.float32)
        if config[4] == "AllReplicas":
            two = np.ones((returned, *array_two.shape), np.float32)
        return one, two

    builder = popart.Builder()
    builder.embedReplicationFactor(replicas)
    session, builder, tensors, arrays, _ = _session(
        config, settings, groups, "training", builder=builder
    )
    _, _, w1, w2 = tensors
    array_one, array_two = arrays
    session.weightsFromHost()
    buffer_one, buffer_two = buffers(array_one, array_two)
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO({w1: buffer_one, w2: buffer_two}))
    if returned == 1:
        assert array_one.shape == buffer_two.shape
    else:
        assert buffer_two.shape[0] == returned and buffer_two.shape[1:] == array_one.shape
    path = str(tmp_path / "model.onnx")
    session.modelToHost(path)
    del session

    session, _, tensors, _, _ = _session(config, settings, groups, "training")
    _, _, w1, w2 = tensors
    session.resetHostWeights(path, True)
    session.weightsFromHost()
    buffer_one, buffer_two = buffers(array_one, array_two)
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO({w1: buffer_one, w2: buffer_two}))
    np.testing.assert_allclose(buffer_one, array_one)
    # Each returned copy holds its group's value (the original's np.allclose broadcasts).
    np.testing.assert_allclose(buffer_two, np.broadcast_to(array_two, buffer_two.shape))


def _off_chip(group, sharded=False):
    return popart.TensorLocationSettings(
        location=popart.TensorLocation(
            storage=popart.TensorStorage.OffChip,
            loadTileSet=popart.TileSet.Compute,
            storageTileSet=popart.TileSet.Compute,
            replicatedTensorSharding=(
                popart.ReplicatedTensorSharding.On
                if sharded
                else popart.ReplicatedTensorSharding.Off
            ),
            shardingDomain=group,
        ),
        minElementsForOffChip=0,
        minElementsForReplicatedTensorSharding=2,
    )


def _trained(replicas, settings, location=None, steps=2):
    """The original's `instance`: a grouped weight trained on the same batches, read back."""
    shape = [O_DIM, CHANNELS, 5, 5]
    builder = popart.Builder()
    input_tensor = builder.addInputTensor(popart.TensorInfo("FLOAT", shape), "input")
    label_tensor = builder.addInputTensor(popart.TensorInfo("INT32", [O_DIM]), "label")
    groups = settings.groups(replicas)
    weight = np.linspace(0, 1, len(groups) * int(np.prod(shape))).astype(np.float32)
    weight = weight.reshape([len(groups)] + shape)
    weight_tensor = builder.addInitializedInputTensor(weight, settings)
    out = builder.aiOnnx.matmul([input_tensor, weight_tensor])
    out = builder.reshape_const(builder.aiOnnx, [out], [O_DIM, CHANNELS * 25])
    out = builder.aiOnnx.softmax([builder.aiOnnx.relu([out])])
    loss = builder.aiGraphcore.nllloss([out, label_tensor])
    options = popart.SessionOptions()
    options.replicatedGraphCount = replicas
    options.enableReplicatedGraphs = True
    options.enableOutlining = False
    if location is not None:
        options.weightTensorLocationSettings = location
    buffer = np.zeros(weight.shape, np.float32)
    weights_io = popart.PyWeightsIO({weight_tensor: buffer})
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(BATCHES_PER_STEP, {out: popart.AnchorReturnType("All")}),
        userOptions=options, loss=loss,
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": replicas, "tilesPerIPU": 4}),
        optimizer=popart.ConstSGD(1e-3),
    )  # fmt: skip
    session.prepareDevice()
    session.weightsFromHost()
    session.weightsToHost()
    session.readWeights(weights_io)
    np.testing.assert_allclose(buffer, weight)
    prefix = [BATCHES_PER_STEP, replicas]
    data = np.tile(np.arange(np.prod(shape), dtype=np.float32), int(np.prod(prefix)))
    labels = np.arange(np.prod(prefix) * O_DIM).reshape(prefix + [O_DIM]) % (CHANNELS * 25)
    for _ in range(steps):
        feed = {input_tensor: data.reshape(prefix + shape), label_tensor: labels.astype(np.int32)}
        session.run(popart.PyStepIO(feed, session.initAnchorArrays()))
    session.weightsToHost()
    session.readWeights(weights_io)
    return buffer


@pytest.mark.follows("test_locations")
@pytest.mark.slow
def test_locations():
    group = popart.CommGroup(popart.CommGroupType.Consecutive, 2)
    settings = popart.VariableSettings(group)
    local = _trained(4, settings)
    np.testing.assert_allclose(local, _trained(4, settings, _off_chip(group)))
    np.testing.assert_allclose(local, _trained(4, settings, _off_chip(group, sharded=True)))
