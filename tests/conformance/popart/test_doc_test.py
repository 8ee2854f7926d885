"""graphcore/popart tests/integration/doc_test.py: the user guide's examples of importing a
model exported by another framework (an AlexNet from torchvision) run: an InferenceSession
made from the ONNX file, and a TrainingSession of a Builder that loads the file and adds a
label input and an NLL loss. torch is not available here, so the model is a small
convolutional classifier written as ONNX (opset 11) directly; each session also runs, its
results checked against onnxruntime's (Cpu)."""

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import popart

BATCH = 4


def _exported_model(path):
    """A classifier like the examples' AlexNet, smaller: Conv, Relu, MaxPool, Flatten, Gemm,
    Softmax, with "output" as its output."""
    rng = np.random.default_rng(0)
    weights = {
        "conv_w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3,
        "conv_b": rng.standard_normal(4).astype(np.float32) * 0.1,
        "fc_w": rng.standard_normal((10, 4 * 4 * 4)).astype(np.float32) * 0.3,
        "fc_b": rng.standard_normal(10).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Conv", ["input", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["output"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "exported",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [BATCH, 3, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [BATCH, 10])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    onnx.save(model, path)
    return weights


def _onnxruntime_output(path, data):
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(["output"], {"input": data})[0]


@pytest.mark.follows("test_importing_graphs")
def test_importing_graphs(tmp_path):
    path = str(tmp_path / "alexnet.onnx")
    _exported_model(path)
    data_flow = popart.DataFlow(2, {"output": popart.AnchorReturnType("All")})
    session = popart.InferenceSession(path, data_flow, popart.DeviceManager().createCpuDevice())
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    data = np.random.default_rng(1).standard_normal((2, BATCH, 3, 8, 8)).astype(np.float32)
    session.run(popart.PyStepIO({"input": data}, anchors))
    for step in range(2):
        np.testing.assert_allclose(
            anchors["output"][step], _onnxruntime_output(path, data[step]), rtol=1e-5, atol=1e-6
        )


@pytest.mark.follows("test_importing_session")
def test_importing_session(tmp_path):
    path = str(tmp_path / "alexnet.onnx")
    _exported_model(path)
    builder = popart.Builder(path)
    labels = builder.addInputTensor("INT32", [BATCH], "label_input")
    nll = builder.aiGraphcore.nllloss(["output", labels])
    session = popart.TrainingSession(
        builder.getModelProto(),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        dataFlow=popart.DataFlow(1, {nll: popart.AnchorReturnType("All")}),
        loss=nll,
        optimizer=popart.ConstSGD(0.001),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    data = np.random.default_rng(2).standard_normal((BATCH, 3, 8, 8)).astype(np.float32)
    label_data = np.array([1, 3, 5, 7], np.int32)
    session.run(popart.PyStepIO({"input": data, labels: label_data}, anchors))
    probabilities = _onnxruntime_output(path, data)
    expected = -np.mean(np.log(probabilities[np.arange(BATCH), label_data]))
    np.testing.assert_allclose(anchors[nll], expected, rtol=1e-5)
