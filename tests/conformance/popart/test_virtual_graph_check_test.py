"""graphcore/popart tests/integration/virtual_graph_check_test.py: in Manual virtual-graph
mode a session accepts a model with no virtual graphs or one on every op, and refuses one
where only some ops have one ("Either all ..."), on the test device (Cpu)."""

import pytest

import popart


def _model(graphs):
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    o1 = builder.aiOnnx.add([i1, i2])
    o2 = builder.aiOnnx.add([i1, i2])
    o = builder.aiOnnx.add([o1, o2])
    builder.addOutputTensor(o)
    for tensor, graph in zip((o1, o2, o), graphs, strict=False):
        builder.virtualGraph(tensor, graph)
    return builder.getModelProto(), o


def _session(graphs, manual):
    proto, o = _model(graphs)
    options = popart.SessionOptions()
    if manual:
        options.virtualGraphMode = popart.VirtualGraphMode.Manual
    return popart.InferenceSession(
        fnModel=proto,
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        userOptions=options,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )


@pytest.mark.follows("test_no_virtual_graph")
def test_no_virtual_graph():
    _session([], manual=False)


@pytest.mark.follows("test_all_virtual_graph")
def test_all_virtual_graph():
    _session([0, 1, 1], manual=True)


@pytest.mark.follows("test_mixed_virtual_graph")
def test_mixed_virtual_graph():
    with pytest.raises(popart.popart_exception) as error:
        _session([0, 1], manual=True)
    assert error.value.args[0].startswith("Either all")
