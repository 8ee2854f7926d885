"""graphcore/popart tests/integration/inplace_tests/inplace_weight_test.py: with InPlace on, an
Add preferred in place on its weight input is made in place on its other input instead (a
weight is never modified in place), a Transpose of the weight preferred in place stays a view
while the Add goes in place on the data, and in training a Reshape between them is kept out of
place so that the Add can be in place on it; the results equal those with InPlace off
(IpuModel2)."""

import numpy as np
import pytest
from popart_ir_checks import ir_of
from popart_session_helpers import ipu_model_device

import popart


def _count(session, op_type, forward_only=False):
    graph = ir_of(session)["maingraph"]
    if forward_only:
        graph = [op for op in graph if not op["outputs"][0]["name"].startswith("Gradient___")]
    return len([op for op in graph if op["type"] == op_type])


def _sessions(build, data, constant_weights, training=False, steps=2):
    """Sessions of the model with InPlace on and off, run `steps` times with equal anchors;
    the one with InPlace on."""
    sessions = []
    for inplacing in (True, False):
        builder = popart.Builder()
        loss = build(builder)
        patterns = popart.Patterns(popart.PatternsLevel.Default)
        patterns.InPlace = inplacing
        opts = popart.SessionOptions()
        opts.constantWeights = constant_weights
        kwargs = dict(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, [loss]),
            deviceInfo=ipu_model_device(),
            userOptions=opts,
            patterns=patterns,
        )
        if training:
            session = popart.TrainingSession(loss=loss, optimizer=popart.ConstSGD(1e-3), **kwargs)
        else:
            session = popart.InferenceSession(**kwargs)
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        session.weightsFromHost()
        sessions.append((session, popart.PyStepIO({"data": data.copy()}, anchors), anchors))
    for _ in range(steps):
        for session, stepio, _ in sessions:
            session.run(stepio)
        for key in sessions[0][2]:
            np.testing.assert_allclose(sessions[0][2][key], sessions[1][2][key], rtol=1e-6)
    return sessions[0][0]


@pytest.mark.follows("test_inplace_weight_add")
@pytest.mark.parametrize("constantWeights", [True, False])
def test_inplace_weight_add(constantWeights):
    np.random.seed(0)
    data = np.random.rand(31).astype(np.float32)
    weight = np.random.rand(31).astype(np.float32)

    def build(builder):
        input_ = builder.addInputTensor(popart.TensorInfo("FLOAT", data.shape), "data")
        sin = builder.aiOnnx.sin([input_], "sin")
        w = builder.addInitializedInputTensor(weight, "input_weights")
        add = builder.aiOnnx.add([sin, w], "add")
        builder.setInplacePreferences(add, {"AddRhsInplace": +1e8})
        cos = builder.aiOnnx.cos([add], "cos")
        loss = builder.aiGraphcore.l1loss([cos], 0.1, reduction=popart.ReductionType.Mean)
        builder.addOutputTensor(loss)
        return loss

    session = _sessions(build, data, constantWeights)
    assert _count(session, "AddLhsInplace") == 1


@pytest.mark.follows("test_non_modifying_inplace")
@pytest.mark.parametrize("constantWeights", [True, False])
def test_non_modifying_inplace(constantWeights):
    np.random.seed(0)
    data = np.random.rand(5, 7, 3).astype(np.float32)
    weight = np.random.rand(7, 3, 5).astype(np.float32)

    def build(builder):
        input_ = builder.addInputTensor(popart.TensorInfo("FLOAT", data.shape), "data")
        w = builder.addInitializedInputTensor(weight, "input_weights")
        trans = builder.aiOnnx.transpose([w], [2, 0, 1], "transpose")
        builder.setInplacePreferences(trans, {"TransposeInplace": +1e8})
        add = builder.aiOnnx.add([input_, trans], "add")
        builder.setInplacePreferences(add, {"AddRhsInplace": +1e7})
        loss = builder.aiGraphcore.l1loss([add], 0.1, reduction=popart.ReductionType.Mean)
        builder.addOutputTensor(loss)
        return loss

    session = _sessions(build, data, constantWeights)
    if not constantWeights:  # a constant weight's Transpose is folded away
        assert _count(session, "TransposeInplace") == 1
    assert _count(session, "AddLhsInplace") == 1


@pytest.mark.follows("test_non_modifying_inplace_2")
@pytest.mark.parametrize("constantWeights", [True, False])
def test_non_modifying_inplace_2(constantWeights):
    input_size = [2, 4, 3]
    np.random.seed(0)
    data = np.random.rand(*input_size).astype(np.float32)
    weight = np.random.rand(2, 3, 2, 2).astype(np.float32)

    def build(builder):
        input_ = builder.addInputTensor(popart.TensorInfo("FLOAT", data.shape), "data")
        w = builder.addInitializedInputTensor(weight, "input_weights")
        shape = builder.aiOnnx.constant(np.array(input_size))
        transpose = builder.aiOnnx.transpose([w], [0, 2, 1, 3], "transpose")
        builder.setInplacePreferences(transpose, {"TransposeInplace": +1e8})
        reshape = builder.aiOnnx.reshape([transpose, shape], "reshape")
        builder.setInplacePreferences(reshape, {"ReshapeInplace": +1e6})
        add = builder.aiOnnx.add([input_, reshape], "add")
        builder.setInplacePreferences(add, {"AddRhsInplace": +1e7})
        loss = builder.aiGraphcore.l1loss([add], 0.1, reduction=popart.ReductionType.Mean)
        builder.addOutputTensor(loss)
        return loss

    session = _sessions(build, data, constantWeights, training=True)
    assert _count(session, "TransposeInplace", forward_only=True) == 1
    assert _count(session, "ReshapeInplace", forward_only=True) == 0
    assert _count(session, "Reshape", forward_only=True) == 1
    assert _count(session, "AddRhsInplace", forward_only=True) == 1
