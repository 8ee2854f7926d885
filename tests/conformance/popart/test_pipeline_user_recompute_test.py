"""graphcore/popart tests/integration/pipelining_tests/pipeline_user_recompute_test.py: with
pipeline recomputation and the user's checkpoints (`builder.checkpointOutput`), a pipelined
model trains as without recomputation (GroupNorm layers, Gelu chains), and its IR stashes
only the checkpoints, restores before use and recomputes only what the final stage must
(IpuModel2, two IPUs, not compiled in the original). The IR scenarios read the serialised
IR."""

import json

import numpy as np
import pytest

import popart
from conftest import create_test_device

ACCUMULATION = 5
HIDDEN = 16


def _options(mode):
    options = popart.SessionOptions()
    options.enableOutlining = False
    options.enablePipelining = True
    options.enableGradientAccumulation = True
    options.accumulationFactor = ACCUMULATION
    options.optimizerStateTensorLocationSettings.location.storage = popart.TensorStorage.OffChip
    if mode is not None:
        options.autoRecomputation = mode
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    return options


def _session(builder, anchors, loss, mode, bps=1, optimizer=None):
    device = create_test_device("IpuModel2", 2)
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(bps, anchors),
        userOptions=_options(mode),
        loss=loss,
        optimizer=optimizer or popart.Adam({}),
        deviceInfo=device,
    )
    return session, device


def _train(build, mode, runs=2):
    """Trains the model `build(builder) -> (x_in, anchors, loss, extra)` for a few steps;
    its anchors, the session (for the IR) and `extra`."""
    np.random.seed(0)
    weight_data = np.random.normal(0, 0.02, [HIDDEN, HIDDEN]).astype(np.float32)
    input_data = np.random.normal(0, 0.02, [ACCUMULATION, 1, HIDDEN]).astype(np.float32)
    builder = popart.Builder()
    x_in, anchors, loss, extra = build(builder, weight_data)
    session, device = _session(builder, anchors, loss, mode)
    try:
        session.prepareDevice()
        session.weightsFromHost()
        arrays = session.initAnchorArrays()
        for _ in range(runs):
            session.run(popart.PyStepIO({x_in: input_data}, arrays))
    finally:
        device.detach()
    return arrays, session, extra


def _group_norm_model(builder, weight_data):
    def norm(x):
        gamma = builder.addInitializedInputTensor(np.ones(HIDDEN, np.float32), "Gamma")
        beta = builder.addInitializedInputTensor(np.zeros(HIDDEN, np.float32), "Beta")
        return builder.aiGraphcore.groupnormalization([x, gamma, beta], 1)[0]

    x_in = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, HIDDEN]), "x_in")
    weights = [builder.addInitializedInputTensor(weight_data, f"weight_{n}") for n in (1, 2, 3)]
    with builder.virtualGraph(0), builder.pipelineStage(0):
        x_0 = builder.checkpointOutput([norm(builder.aiOnnx.matmul([x_in, weights[0]]))])[0]
        x_1 = norm(builder.aiOnnx.matmul([x_0, weights[1]]))
        x_1 = builder.checkpointOutput([builder.aiOnnx.add([x_0, x_1])])[0]
    with builder.virtualGraph(1), builder.pipelineStage(1):
        o = builder.aiOnnx.matmul([x_1, weights[2]])
        l1 = builder.aiGraphcore.l1loss([o], 0.1)
    anchors = [o, *(popart.reservedGradientPrefix() + w for w in weights)]
    return x_in, anchors, l1, x_0


def _gelu_model(builder, weight_data):
    x_in = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, HIDDEN]), "x_in")
    weight_1 = builder.addInitializedInputTensor(weight_data, "weight_1")
    with builder.virtualGraph(0), builder.pipelineStage(0):
        x = builder.checkpointOutput([builder.aiOnnx.matmul([x_in, weight_1])])[0]
        for _ in range(2):
            x = builder.aiGraphcore.gelu([builder.aiOnnx.add([x, x])])
            x = builder.checkpointOutput([x])[0]
    with builder.virtualGraph(1), builder.pipelineStage(1):
        l1 = builder.aiGraphcore.l1loss([x], 0.1)
    return x_in, [x, popart.reservedGradientPrefix() + weight_1], l1, None


def _assert_same(plain, recomputed):
    for key, value in plain.items():
        np.testing.assert_allclose(recomputed[key], value, rtol=1e-5, atol=1e-7, err_msg=key)


@pytest.mark.follows("test_full_recompute_pipelining")
def test_full_recompute_pipelining_numbers():
    plain, _, _ = _train(_group_norm_model, None)
    recomputed, _, _ = _train(_group_norm_model, popart.RecomputationType.Pipeline)
    _assert_same(plain, recomputed)


@pytest.mark.follows("test_full_recompute_pipelining")
def test_full_recompute_pipelining():
    _, session, mid_stash = _train(_group_norm_model, popart.RecomputationType.Pipeline, 1)
    ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    stashes = [op for op in ir["maingraph"] if op["type"] == "Stash"]
    assert {stash["inputs"][0]["name"] for stash in stashes} == {"x_in", mid_stash}


@pytest.mark.follows("test_delayed_restore_operations")
def test_delayed_restore_operations_numbers():
    plain, _, _ = _train(_gelu_model, None)
    recomputed, _, _ = _train(_gelu_model, popart.RecomputationType.Pipeline)
    _assert_same(plain, recomputed)


@pytest.mark.follows("test_delayed_restore_operations")
def test_delayed_restore_operations():
    _, session, _ = _train(_gelu_model, popart.RecomputationType.Pipeline, 1)
    ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    kinds = {"Add": "a", "GeluGrad": "g", "RestoreInplace": "r"}
    schedule = "".join(
        next((c for k, c in kinds.items() if k in op["type"]), "_") for op in ir["maingraph"]
    )
    assert schedule.count("rga") == 2


@pytest.mark.follows("test_final_stage_recompute_0")
def test_final_stage_recompute_0():
    np.random.seed(0)
    weight_data = np.random.normal(0, 0.02, [HIDDEN, HIDDEN]).astype(np.float32)
    builder = popart.Builder()
    x_in = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, HIDDEN]), "x_in")
    with builder.virtualGraph(0), builder.pipelineStage(0):
        x = builder.aiOnnx.matmul([x_in, builder.addInitializedInputTensor(weight_data)])
    with builder.virtualGraph(1), builder.pipelineStage(1):
        x_recomp = builder.aiOnnx.matmul([x, builder.addInitializedInputTensor(weight_data)])
        x = builder.checkpointOutput([x_recomp])[0]
        x_no_recomp = builder.aiOnnx.matmul([x, builder.addInitializedInputTensor(weight_data)])
        l1 = builder.aiGraphcore.l1loss([x_no_recomp], 0.1)
    session, device = _session(builder, [l1], l1, popart.RecomputationType.Pipeline)
    try:
        ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    finally:
        device.detach()
    for op in ir["maingraph"]:
        outputs = [out["name"] for out in op["outputs"]]
        if x_recomp in outputs:
            assert op["attributes"]["recompute"] == "YES"
        elif x_no_recomp in outputs:
            assert op["attributes"]["recompute"] == "NO"


@pytest.mark.follows("test_final_stage_recompute_1")
def test_final_stage_recompute_1():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT16", [2, 4])
    w = builder.addInitializedInputTensor(np.random.rand(4, 3).astype(np.float16))
    label = builder.addInputTensor("INT32", [2])
    with builder.virtualGraph(0), builder.pipelineStage(0):
        mm = builder.aiOnnx.matmul([x, w])
    with builder.virtualGraph(1), builder.pipelineStage(1):
        sfm = builder.aiOnnx.softmax([mm])
        label = builder.aiOnnx.cast([label], "UINT32")
        loss = builder.aiGraphcore.nllloss([sfm, label])
    builder.recomputeOutputInBackwardPass(label, popart.RecomputeType.Checkpoint)
    options = popart.SessionOptions()
    options.autoRecomputation = popart.RecomputationType.Pipeline
    options.enablePipelining = True
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    device = create_test_device("IpuModel2", 2)
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            userOptions=options,
            loss=loss,
            optimizer=popart.ConstSGD(0.1),
            deviceInfo=device,
            dataFlow=popart.DataFlow(3, [loss]),
        )
        ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    finally:
        device.detach()
    final_stage = [op for op in ir["maingraph"] if op["attributes"]["__pipeline_stage"] == "1"]
    assert not [op for op in final_stage if op["attributes"]["recompute"] == "YES"]
