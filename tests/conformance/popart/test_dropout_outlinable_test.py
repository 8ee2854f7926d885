"""graphcore/popart tests/integration/dropout_tests/dropout_outlinable_test.py: six
MatMul-Dropout layers train, and the original's IR outlines their dropouts into at most two
Dropout ops, which the scenario reads from the serialised IR (Cpu)."""

import json

import numpy as np
import pytest

import popart

RATIO = 0.7


def _train():
    np.random.seed(253)
    input_data = np.random.rand(1, 20, 40).astype(np.float32)
    weight_data = np.random.rand(1, 40, 40).astype(np.float32)
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", (1, 20, 40)), "data0")
    x = d0
    for i in range(6):
        w = builder.addInitializedInputTensor(weight_data, debugContext=f"weight_{i}")
        x = builder.aiOnnx.matmul([x, w], debugContext=f"matmul_{i}")
        [x] = builder.aiOnnx.dropout([x], debugContext=f"dropout_{i}", num_outputs=1, ratio=RATIO)
    loss = builder.aiGraphcore.l1loss([x], 0.1, debugContext="loss")
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {x: popart.AnchorReturnType("ALL")}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        userOptions=popart.SessionOptions(),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({d0: input_data}, anchors))
    return session, anchors[x]


@pytest.mark.follows("test_dropout_outlinable")
def test_dropout_outlinable_trains():
    _, output = _train()
    # Positive inputs and weights: an element is zero exactly when a dropout dropped it
    # (the last one, or every path to it), about RATIO of them or more.
    dropped = np.mean(output == 0)
    assert RATIO - 0.15 < dropped < 1
    assert np.all(output >= 0)


@pytest.mark.follows("test_dropout_outlinable")
def test_dropout_outlinable():
    session, _ = _train()
    ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    assert len([op for op in ir["maingraph"] if op["type"] == "Dropout"]) <= 2
