"""graphcore/popart tests/integration/operators_test/identity_loss_test.py: an IdentityLoss
of a scalar (and its grad op) is pruned by the OpToIdentity pattern, as the serialised IR
shows (Cpu)."""

import json

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_remove_redundant_identityloss")
def test_remove_redundant_identityloss():
    builder = popart.Builder()
    in0 = builder.addInputTensor("FLOAT", [1, 4, 4])
    in1 = builder.addInputTensor("INT32", [1, 4])
    w0 = builder.addInitializedInputTensor(np.random.rand(4, 4).astype(np.float32))
    m = builder.aiOnnx.matmul([in0, w0])
    l1 = builder.aiGraphcore.nllloss([m, in1], reduction=popart.ReductionType.Sum)
    idloss = builder.aiGraphcore.identityloss([l1])

    def main_graph(op_to_identity):
        patterns = popart.Patterns(popart.PatternsLevel.All)
        patterns.OpToIdentity = op_to_identity
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            deviceInfo=popart.DeviceManager().createCpuDevice(),
            dataFlow=popart.DataFlow(1, [idloss]),
            loss=idloss,
            optimizer=popart.ConstSGD(0.1),
            patterns=patterns,
        )
        return json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))["maingraph"]

    for op_to_identity, expected in ((False, 1), (True, 0)):
        graph = main_graph(op_to_identity)
        assert len([op for op in graph if op["type"] == "IdentityLoss"]) == expected
        assert len([op for op in graph if op["type"] == "IdentityLossGrad"]) == expected
