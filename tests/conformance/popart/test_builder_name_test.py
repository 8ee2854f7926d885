"""graphcore/popart tests/integration/builder_name_test.py: graph names set with
`Builder.setGraphName` (main graph, If branches) name the IR's graphs; an unnamed main graph
is "maingraph". The original reads them from the IR's JSON (`_serializeIr`) (Cpu)."""

import json

import numpy as np
import pytest

import popart


def _ir(builder, outputs):
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All") for o in outputs}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    return json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))


@pytest.mark.follows("test_subgraph_ir_name")
def test_subgraph_ir_name():
    builder = popart.Builder()
    builder.setGraphName("main_graph")
    a = builder.addInputTensor(popart.TensorInfo(np.array([3], np.float32)))
    b = builder.addInputTensor(popart.TensorInfo(np.array([6], np.float32)))
    cond = builder.addInputTensor(popart.TensorInfo(np.array([True], np.float32)))
    then_builder = builder.createSubgraphBuilder()
    then_builder.setGraphName("then_branch")
    then_builder.addInputTensorFromParentGraph(a)
    then_builder.addInputTensorFromParentGraph(b)
    then_builder.addOutputTensor(then_builder.aiOnnxOpset10.add([a, b]))
    else_builder = builder.createSubgraphBuilder()
    else_builder.setGraphName("else_branch")
    else_builder.addInputTensorFromParentGraph(a)
    else_builder.addInputTensorFromParentGraph(b)
    else_builder.addOutputTensor(else_builder.aiOnnxOpset10.sub([b, a]))
    o = builder.aiOnnx.logical_if([cond], 1, else_builder, then_builder)[0]
    builder.addOutputTensor(o)
    ir = _ir(builder, [o])
    assert len(ir["then_branch"]) == 1
    assert len(ir["else_branch"]) == 1


@pytest.mark.follows("test_main_graph_ir_name")
def test_main_graph_ir_name():
    builder = popart.Builder()
    builder.setGraphName("body_graph")
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    o = builder.aiOnnx.add([i1, i1])
    builder.addOutputTensor(o)
    assert len(_ir(builder, [o])["body_graph"]) == 1


@pytest.mark.follows("test_empty_graph_ir_name")
def test_empty_graph_ir_name():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    o = builder.aiOnnx.add([i1, i1])
    builder.addOutputTensor(o)
    assert len(_ir(builder, [o])["maingraph"]) == 1
