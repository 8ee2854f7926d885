"""graphcore/popart tests/integration/annotations_test.py: execution-phase, virtual-graph and
pipeline-stage annotations on a trained chain of MatMuls change no op of the IR (same ops,
names and types, one graph, outlining off) (Cpu)."""

import numpy as np
import pytest
from popart_ir_checks import ir_of

import popart

DSIZE = 10


def _get_ir(executionphases_enabled, virtualgraph_enabled, pipeline_enabled):
    builder = popart.Builder()
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", [DSIZE, DSIZE]))
    anchor_ids = [popart.reservedGradientPrefix() + ip]
    x = ip
    for i in range(3):
        w = builder.addInitializedInputTensor(np.ones([DSIZE, DSIZE], np.float32))
        x = builder.aiOnnx.matmul([x, w])
        if executionphases_enabled:
            builder.executionPhase(x, i)
        if virtualgraph_enabled:
            builder.virtualGraph(x, i)
        if pipeline_enabled:
            builder.pipelineStage(x, i)
        anchor_ids.append(popart.reservedGradientPrefix() + x)
    out = builder.aiGraphcore.identityloss([x])
    if virtualgraph_enabled:
        builder.virtualGraph(out, 3)
    opts = popart.SessionOptions()
    opts.enableOutlining = False
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {a: popart.AnchorReturnType("All") for a in anchor_ids}),
        optimizer=popart.ConstSGD(0.1),
        loss=out,
        patterns=popart.Patterns(popart.PatternsLevel.All),
        userOptions=opts,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    return ir_of(session)


def _compare_irs(ir1, ir2):
    assert len(ir1) == 1
    assert len(ir2) == 1
    g1 = ir1["maingraph"]
    g2 = ir2["maingraph"]
    assert len(g1) == len(g2)
    assert "MatMul" in [op["type"] for op in g1]

    def describe(op):
        return f"{op['name']}:{op['type']}" if op["name"] else op["type"]

    assert [describe(op) for op in g1] == [describe(op) for op in g2]


@pytest.mark.follows("test_ping_pong")
def test_ping_pong():
    _compare_irs(_get_ir(False, False, False), _get_ir(True, False, False))


@pytest.mark.follows("test_pipelining")
def test_pipelining():
    _compare_irs(_get_ir(False, False, False), _get_ir(False, False, True))


@pytest.mark.follows("test_virtualgraphs")
def test_virtualgraphs():
    _compare_irs(_get_ir(False, False, False), _get_ir(False, True, False))
