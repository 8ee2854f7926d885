"""graphcore/popart tests/integration/operators_test/call_test_ipu_model.py: Calls on two
pipeline stages: a called subgraph's ops need the calling op's virtual graph id (IpuModel2)."""

import re

import pytest

import popart
from conftest import create_test_device


def _pipelined_calls(subgraph_of):
    builder = popart.Builder()
    i0 = builder.addInputTensor(popart.TensorInfo("INT32", [2]))
    i1 = builder.addInputTensor(popart.TensorInfo("INT32", [2]))
    with builder.virtualGraph(0), builder.pipelineStage(0):
        act = builder.aiGraphcore.call([i0, i1], 1, subgraph_of(builder, 0))[0]
    with builder.virtualGraph(1), builder.pipelineStage(1):
        out = builder.aiGraphcore.call([act, i1], 1, subgraph_of(builder, 1))[0]
    builder.addOutputTensor(out)
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    device = create_test_device("IpuModel2", num_ipus=4, tiles_per_ipu=20)
    return builder, out, options, device


def _adder(builder, virtual_graph):
    """A subgraph adding its two inputs, on `virtual_graph` (None: no virtual graph id)."""
    subgraph = builder.createSubgraphBuilder()
    info = popart.TensorInfo("INT32", [2])
    a, b = subgraph.addInputTensor(info), subgraph.addInputTensor(info)
    if virtual_graph is None:
        subgraph.addOutputTensor(subgraph.aiOnnx.add([a, b]))
    else:
        with subgraph.virtualGraph(virtual_graph):
            subgraph.addOutputTensor(subgraph.aiOnnx.add([a, b]))
    return subgraph


@pytest.mark.follows("test_call_pipelined_error")
@pytest.mark.parametrize(
    "subgraph_of,pattern",
    [
        (
            lambda builder, stage: _adder(builder, None),
            'Op Op(.*) in subgraph ".*" does not have a virtual graph id. When pipelining, '
            "subgraph ops must have a virtual graph id set.",
        ),
        (
            lambda builder, stage: _adder(builder, 0),  # the second call is on IPU 1
            "The virtual graph id .* for Op Op.* in subgraph .* does not match the virtual "
            "graph id .* of the calling op. When pipelining, subgraph ops must have a virtual "
            "graph id matching the calling op.",
        ),
    ],
    ids=["no_vgraph_id", "wrong_vgraph_id"],
)
def test_call_pipelined_error(subgraph_of, pattern):
    builder, out, options, device = _pipelined_calls(subgraph_of)
    with device, pytest.raises(popart.popart_exception) as e_info:
        popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(10, [out]),
            userOptions=options,
            deviceInfo=device,
        )
    assert re.match(pattern, e_info.value.args[0])


@pytest.mark.follows("test_call_pipelined")
def test_call_pipelined():
    builder, out, options, device = _pipelined_calls(_adder)
    with device:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(10, [out]),
            userOptions=options,
            deviceInfo=device,
        )
        session.prepareDevice()
