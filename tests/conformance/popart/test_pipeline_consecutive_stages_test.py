"""graphcore/popart tests/integration/pipelining_tests/pipeline_consecutive_stages_test.py:
consecutive pipeline stages on the same IPU are merged, so three stages on two IPUs train
with an accumulation factor of 3 (less than three stages' minimum of 5 pipeline cycles), and
with pipeline recomputation only the input is stashed (IpuModel2, two IPUs, not compiled)."""

import json

import numpy as np
import pytest

import popart

HIDDEN = 16
ACCUMULATION = 3


def _session():
    np.random.seed(0)
    weight_data = np.random.normal(0, 0.02, [HIDDEN, HIDDEN]).astype(np.float32)
    builder = popart.Builder()
    x_in = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, HIDDEN]), "x_in")
    weights = [builder.addInitializedInputTensor(weight_data, f"weight_{n}") for n in (1, 2, 3)]
    with builder.virtualGraph(0), builder.pipelineStage(0):
        x_0 = builder.aiOnnx.matmul([x_in, weights[0]])
    with builder.virtualGraph(0), builder.pipelineStage(1):
        x_1 = builder.aiOnnx.matmul([x_0, weights[1]])
    with builder.virtualGraph(1), builder.pipelineStage(2):
        o = builder.aiOnnx.matmul([x_1, weights[2]])
        l1 = builder.aiGraphcore.l1loss([o], 0.1)
    options = popart.SessionOptions()
    options.enableOutlining = False
    options.enablePipelining = True
    options.enableGradientAccumulation = True
    options.accumulationFactor = ACCUMULATION
    options.autoRecomputation = popart.RecomputationType.Pipeline
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    device = popart.DeviceManager().createIpuModelDevice(
        {"numIPUs": 2, "tilesPerIPU": 4, "ipuVersion": "ipu2", "compileIPUCode": False}
    )
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [o]),
        userOptions=options,
        loss=l1,
        optimizer=popart.ConstSGD(1e-9),
        deviceInfo=device,
    )
    return session, device, (x_in, o, weight_data)


@pytest.mark.follows("test_pipeline_stage_merging")
def test_pipeline_stage_merging_accepts_the_accumulation_factor():
    session, device, (x_in, o, weight_data) = _session()
    try:
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        data = np.random.rand(ACCUMULATION, 1, HIDDEN).astype(np.float32)
        session.run(popart.PyStepIO({x_in: data}, anchors))
    finally:
        device.detach()
    # A learning rate of 1e-9 leaves the weights as they were: numpy's three matmuls.
    expected = data @ weight_data @ weight_data @ weight_data
    np.testing.assert_allclose(anchors[o][-1], expected[-1], rtol=1e-4, atol=1e-7)


@pytest.mark.follows("test_pipeline_stage_merging")
def test_pipeline_stage_merging():
    session, device, _ = _session()
    try:
        ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    finally:
        device.detach()
    stashes = [op for op in ir["maingraph"] if op["type"] == "Stash"]
    assert {stash["inputs"][0]["name"] for stash in stashes} == {"x_in"}
