"""graphcore/popart tests/integration/auto_virtual_graph_test.py: VirtualGraphMode.Auto puts
a model's ops on the device's IPUs (inference and training, two and four IPUs), refuses a
model with fewer split points than IPUs, and balances independent subgraphs as the original
does (which the scenarios read from the serialised IR's `__ipu_number`) (IpuModel2)."""

import json

import numpy as np
import pytest

import popart
from conftest import create_test_device


def _auto():
    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Auto
    return options


def _chain(builder, count):
    x = builder.addInputTensor(popart.TensorInfo("FLOAT16", [1, 64]))
    first = x
    for _ in range(count):
        x = builder.aiOnnx.matmul(
            [x, builder.addInitializedInputTensor(np.zeros([64, 64], np.float16))]
        )
    return first, x


def _subgraphs(builder, count):
    """Matmuls of weights TESTID-A, -B (from input 1) and -C (input 2), then, with count
    > 1, their sum through TESTID-D."""
    input1 = builder.addInputTensor(popart.TensorInfo("FLOAT16", [1, 64]))
    input2 = builder.addInputTensor(popart.TensorInfo("FLOAT16", [1, 64]))

    def weight(name):
        return builder.addInitializedInputTensor(np.zeros([64, 64], np.float16), name)

    x0 = builder.aiOnnx.matmul([builder.aiOnnx.matmul([input1, weight("TESTID-A")]),
                                weight("TESTID-B")])  # fmt: skip
    x1 = builder.aiOnnx.matmul([input2, weight("TESTID-C")])
    if count == 1:
        return x1
    return builder.aiOnnx.matmul([builder.aiOnnx.add([x0, x1]), weight("TESTID-D")])


def _ir(builder, output, ipus, options):
    device = create_test_device("IpuModel2", ipus)
    try:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {output: popart.AnchorReturnType("Final")}),
            userOptions=options,
            deviceInfo=device,
        )
        return json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    finally:
        device.detach()


def _check_weights_on(ir, expected):
    for op in ir["maingraph"]:
        for tensor in op["inputs"]:
            for weight, ipu in expected.items():
                if weight in tensor["name"]:
                    assert int(op["attributes"]["__ipu_number"]) == ipu


@pytest.mark.follows("test_auto_virtual_graph_subgraphs_1")
def test_auto_virtual_graph_subgraphs_1():
    builder = popart.Builder()
    output = _subgraphs(builder, 1)
    for op in _ir(builder, output, 1, _auto())["maingraph"]:
        assert int(op["attributes"]["__ipu_number"]) == 0


@pytest.mark.follows("test_auto_virtual_graph_subgraphs_2")
def test_auto_virtual_graph_subgraphs_2():
    builder = popart.Builder()
    output = _subgraphs(builder, 2)
    ir = _ir(builder, output, 2, _auto())
    _check_weights_on(ir, {"TESTID-A": 0, "TESTID-B": 0, "TESTID-C": 1, "TESTID-D": 1})


@pytest.mark.follows("test_auto_virtual_graph_subgraphs_4")
def test_auto_virtual_graph_subgraphs_4():
    builder = popart.Builder()
    output = _subgraphs(builder, 4)
    ir = _ir(builder, output, 4, _auto())
    _check_weights_on(ir, {"TESTID-A": 0, "TESTID-B": 1, "TESTID-C": 2, "TESTID-D": 3})


@pytest.mark.follows("test_auto_virtual_graph_subgraphs_4_with_user_parameters")
def test_auto_virtual_graph_subgraphs_4_with_user_parameters():
    builder = popart.Builder()
    output = _subgraphs(builder, 4)
    options = _auto()
    options.virtualGraphSplitRatios = [0.2, 0.3, 0.2, 0.3]
    ir = _ir(builder, output, 4, options)
    _check_weights_on(ir, {"TESTID-A": 0, "TESTID-B": 1, "TESTID-C": 2, "TESTID-D": 3})


def _infer_chain(count, ipus):
    builder = popart.Builder()
    x, output = _chain(builder, count)
    device = create_test_device("IpuModel2", ipus)
    try:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {output: popart.AnchorReturnType("Final")}),
            userOptions=_auto(),
            deviceInfo=device,
        )
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({x: np.ones([1, 64], np.float16)}, anchors))
        graphs = {op.get("virtualGraph") for op in json.loads(session.getSerializedGraph())["ops"]}
    finally:
        device.detach()
    return anchors[output], graphs


@pytest.mark.follows("test_auto_virtual_graph_inf_2")
def test_auto_virtual_graph_inf_2():
    result, graphs = _infer_chain(2, 2)
    # (Beyond the original, which only creates the session) zero weights give zeros, and
    # the ops went to both IPUs.
    np.testing.assert_array_equal(result, np.zeros([1, 64], np.float16))
    assert graphs == {0, 1}


@pytest.mark.follows("test_auto_virtual_graph_inf_many")
def test_auto_virtual_graph_inf_many():
    result, graphs = _infer_chain(16, 4)
    np.testing.assert_array_equal(result, np.zeros([1, 64], np.float16))
    assert graphs == {0, 1, 2, 3}


@pytest.mark.follows("test_auto_virtual_graph_train")
def test_auto_virtual_graph_train():
    builder = popart.Builder()
    x, output = _chain(builder, 2)
    loss = builder.aiGraphcore.identityloss([output])
    device = create_test_device("IpuModel2", 2)
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {loss: popart.AnchorReturnType("Final")}),
            userOptions=_auto(),
            loss=loss,
            optimizer=popart.SGD({"defaultLearningRate": (0.01, True)}),
            deviceInfo=device,
        )
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({x: np.ones([1, 64], np.float16)}, anchors))
    finally:
        device.detach()
    np.testing.assert_array_equal(anchors[loss], 0)


@pytest.mark.follows("test_auto_virtual_graph_not_enough_splits")
def test_auto_virtual_graph_not_enough_splits():
    builder = popart.Builder()
    _, output = _chain(builder, 2)
    device = create_test_device("IpuModel2", 4)
    try:
        with pytest.raises(popart.popart_exception) as error:
            popart.InferenceSession(
                fnModel=builder.getModelProto(),
                dataFlow=popart.DataFlow(1, {output: popart.AnchorReturnType("Final")}),
                userOptions=_auto(),
                deviceInfo=device,
            )
    finally:
        device.detach()
    assert error.value.args[0].startswith("[AutoVirtualGraph] Couldn't find enough splits")
