"""graphcore/popart tests/integration/virtual_graph_test.py: models placed on virtual graphs
(each op's, a multi-output op's, nested contexts) run in inference and training on IPU
Models of two and four IPUs, an out-of-range virtual graph is refused when the device is
prepared, and the streamed optimizer tensors of a pipelined session are those of the same
session on one IPU (IpuModel2)."""

import numpy as np
import pytest
from popart_session_helpers import infer_on

import popart
from conftest import create_test_device


def _manual():
    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    return options


def _infer(builder, output, num_ipus, feed):
    device = create_test_device("IpuModel2", num_ipus)
    return infer_on(device, builder.getModelProto(), [output], feed, _manual())[output]


def _four_inputs(builder, count=4):
    return [builder.addInputTensor(popart.TensorInfo("FLOAT", [1])) for _ in range(count)]


@pytest.mark.follows("test_virtual_graph")
def test_virtual_graph():
    builder = popart.Builder()
    i1, i2, i3, i4 = _four_inputs(builder)
    o1 = builder.aiOnnx.add([i1, i2])
    o2 = builder.aiOnnx.add([i3, i4])
    o = builder.aiOnnx.add([o1, o2])
    builder.addOutputTensor(o)
    for tensor in (o1, o2, o):
        builder.virtualGraph(tensor, 1)
    values = np.random.rand(4, 1).astype(np.float32)
    result = _infer(builder, o, 2, dict(zip((i1, i2, i3, i4), values, strict=True)))
    # (Beyond the original, which only prepares it) numpy's answer.
    np.testing.assert_allclose(result, values.sum(axis=0), rtol=1e-6)


@pytest.mark.follows("test_virtual_graph_multi_output")
@pytest.mark.parametrize("container", [set, list])
def test_virtual_graph_multi_output(container):
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 1]))
    o1, o2, o3, o4 = builder.aiOnnx.split([i1], 4)
    o5 = builder.aiOnnx.add([o1, o2])
    o6 = builder.aiOnnx.add([o3, o4])
    o = builder.aiOnnx.add([o5, o6])
    builder.addOutputTensor(o)
    builder.virtualGraph(container([o1, o2, o3, o4]), 1)
    for tensor in (o5, o6, o):
        builder.virtualGraph(tensor, 0)
    assert builder.getVirtualGraph(container([o1, o2, o3, o4])) == 1
    values = np.random.rand(4, 1).astype(np.float32)
    np.testing.assert_allclose(_infer(builder, o, 2, {i1: values}), [[values.sum()]], rtol=1e-6)


@pytest.mark.follows("test_virtual_graph2")
def test_virtual_graph2():
    builder = popart.Builder()
    i1, i2, i3, i4 = _four_inputs(builder)
    with builder.virtualGraph(0):
        o1 = builder.aiOnnx.add([i1, i2])
        o2 = builder.aiOnnx.add([i3, i4])
    with builder.virtualGraph(1):
        o = builder.aiOnnx.add([o1, o2])
    builder.addOutputTensor(o)
    values = np.random.rand(4, 1).astype(np.float32)
    result = _infer(builder, o, 2, dict(zip((i1, i2, i3, i4), values, strict=True)))
    np.testing.assert_allclose(result, values.sum(axis=0), rtol=1e-6)


def _train(builder, loss, anchors, optimizer, inputs):
    device = create_test_device("IpuModel2", 4)
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {a: popart.AnchorReturnType("All") for a in anchors}),
            loss=loss,
            optimizer=optimizer,
            userOptions=_manual(),
            deviceInfo=device,
        )
        session.prepareDevice()
        arrays = session.initAnchorArrays()
        session.run(popart.PyStepIO({i: np.ones([1], np.float32) for i in inputs}, arrays))
        session.weightsFromHost()
    finally:
        device.detach()
    return arrays


@pytest.mark.follows("test_virtual_graph3")
def test_virtual_graph3():
    builder = popart.Builder()
    i1, i2, i3, i4 = _four_inputs(builder)
    with builder.virtualGraph(3):
        o1 = builder.aiOnnx.add([i1, i2])
        o2 = builder.aiOnnx.add([i3, i4])
    with builder.virtualGraph(2):
        o3 = builder.aiOnnx.add([o1, o2])
        o = builder.aiOnnx.add([i1, o3])
        o = builder.aiGraphcore.l1loss([o], 0.1)
    g = popart.reservedGradientPrefix()
    inputs = (i1, i2, i3, i4)
    arrays = _train(builder, o, [o, *(g + i for i in inputs)],
                    popart.SGD({"defaultLearningRate": (0.01, True)}), inputs)  # fmt: skip
    # (Beyond the original) loss = 0.1 * |2 i1 + i2 + i3 + i4| of ones; its gradients.
    np.testing.assert_allclose(arrays[o], 0.5, rtol=1e-6)
    np.testing.assert_allclose([arrays[g + i][0] for i in inputs], [0.2, 0.1, 0.1, 0.1], rtol=1e-6)


@pytest.mark.follows("test_virtual_graph4")
def test_virtual_graph4():
    builder = popart.Builder()
    i1, i2, i3 = _four_inputs(builder, 3)
    with builder.virtualGraph(3):
        o1 = builder.aiOnnx.add([i1, i2])
        o1l1 = builder.aiGraphcore.l1loss([o1], 0.1)
        o2 = builder.aiOnnx.add([i3, o1])
        o2l1 = builder.aiGraphcore.l1loss([o2], 0.1)
    with builder.virtualGraph(2):
        o3 = builder.aiOnnx.mul([i1, i3])
        o3l1 = builder.aiGraphcore.l1loss([o3], 0.1)
    with builder.virtualGraph(3):
        loss = builder.aiOnnx.sum([o1l1, o2l1, o3l1])
    g = popart.reservedGradientPrefix()
    arrays = _train(builder, loss, [o1, o2, o3, g + i1, g + i2, g + i3],
                    popart.ConstSGD(0.01), (i1, i2, i3))  # fmt: skip
    np.testing.assert_allclose([arrays[o1][0], arrays[o2][0], arrays[o3][0]], [2, 3, 1])
    # d/di1 of 0.1 (|i1 + i2| + |i1 + i2 + i3| + |i1 i3|) at ones, and so on.
    np.testing.assert_allclose([arrays[g + i][0] for i in (i1, i2, i3)], [0.3, 0.2, 0.2], rtol=1e-6)


@pytest.mark.follows("test_virtual_graph_bad_index")
def test_virtual_graph_bad_index():
    # The original's body is commented out (an op on virtual graph 2 of a two-IPU device);
    # the original refuses it when it lowers the IR, in prepareDevice (irlowering.cpp).
    builder = popart.Builder()
    i1, i2 = _four_inputs(builder, 2)
    o1 = builder.aiOnnx.add([i1, i2])
    o2 = builder.aiOnnx.add([i1, i2])
    o = builder.aiOnnx.add([o1, o2])
    builder.addOutputTensor(o)
    for tensor, graph in ((o1, 0), (o2, 1), (o, 2)):
        builder.virtualGraph(tensor, graph)
    device = create_test_device("IpuModel2", 2)
    try:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
            userOptions=_manual(),
            deviceInfo=device,
        )
        with pytest.raises(popart.popart_exception, match="invalid virtual graph 2. numIPUs = 2"):
            session.prepareDevice()
    finally:
        device.detach()


@pytest.mark.follows("test_streaming_optimizer_tensors")
def test_streaming_optimizer_tensors():
    bps = 5
    input_data = np.random.rand(bps, 2, 2).astype(np.float32)
    weight_data = [np.random.rand(2, 2).astype(np.float32) for _ in range(3)]
    anchor = popart.reservedDefaultScaledLearningRate0Prefix() + "FLOAT"

    def run(pipelined):
        builder = popart.Builder()
        i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]))
        x = i1
        for ipu, data in enumerate(weight_data):
            x = builder.aiOnnx.matmul([x, builder.addInitializedInputTensor(data)])
            if pipelined:
                builder.virtualGraph(x, ipu)
        loss = builder.aiGraphcore.l1loss([x], 0.1)
        options = popart.SessionOptions()
        if pipelined:
            builder.virtualGraph(loss, 2)
            options.virtualGraphMode = popart.VirtualGraphMode.Manual
        options.enablePipelining = pipelined
        device = create_test_device("IpuModel2", 3 if pipelined else 1)
        try:
            session = popart.TrainingSession(
                fnModel=builder.getModelProto(),
                dataFlow=popart.DataFlow(bps, [anchor]),
                loss=loss,
                optimizer=popart.SGD({"defaultLearningRate": (1.0, False)}),
                userOptions=options,
                deviceInfo=device,
            )
            session.prepareDevice()
            arrays = session.initAnchorArrays()
            stepio = popart.PyStepIO({i1: input_data}, arrays)
            session.weightsFromHost()
            results = []
            session.run(stepio)
            results.append(np.copy(arrays[anchor]))
            session.updateOptimizerFromHost(popart.SGD({"defaultLearningRate": (0.5, False)}))
            session.run(stepio)
            results.append(np.copy(arrays[anchor]))
        finally:
            device.detach()
        return results

    plain, pipelined = run(False), run(True)
    for x, y in zip(plain, pipelined, strict=True):
        np.testing.assert_array_equal(x, y)
    # (Beyond the original) SGD's scaled learning rate of each batch: the learning rate.
    np.testing.assert_allclose(pipelined, [[1.0] * bps, [0.5] * bps])
