"""Bad input to sessions: each rule raises a clear popart_exception naming what is wrong."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import popart


def session_for(model, device, *, anchors=None, batches_per_step=1, **kwargs):
    anchors = anchors if anchors is not None else [model.y]
    return popart.InferenceSession(
        model.proto, popart.DataFlow(batches_per_step, anchors), device, **kwargs
    )


# -- the model -------------------------------------------------------------------------------


def test_truncated_model_bytes(small_model, ipu_model_device):
    data_flow = popart.DataFlow(1, [small_model.y])
    with pytest.raises(popart.popart_exception, match="Failed to load a ModelProto|not a valid"):
        popart.InferenceSession(
            small_model.proto[: len(small_model.proto) // 2], data_flow, ipu_model_device
        )


def test_garbage_model_bytes_and_missing_file(ipu_model_device, tmp_path):
    data_flow = popart.DataFlow(1, ["y"])
    with pytest.raises(popart.popart_exception):
        popart.InferenceSession(b"\x00\x01garbage\xff" * 10, data_flow, ipu_model_device)
    with pytest.raises(popart.popart_exception, match="valid path to an existing onnx model file"):
        popart.InferenceSession(str(tmp_path / "missing.onnx"), data_flow, ipu_model_device)
    with pytest.raises(popart.popart_exception, match="must be serialized ModelProto bytes"):
        popart.InferenceSession(12, data_flow, ipu_model_device)


def one_node_model(op_type, domain="", opsets=(("", 11),), **attributes):
    node = helper.make_node(op_type, ["x"], ["y"], domain=domain, name="the_node", **attributes)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    return model.SerializeToString()


def test_unknown_op_is_named(ipu_model_device):
    proto = one_node_model("NoSuchOp", domain="my.domain", opsets=(("", 11), ("my.domain", 1)))
    with pytest.raises(popart.popart_exception, match="NoSuchOp.*the_node"):
        popart.InferenceSession(proto, popart.DataFlow(1, ["y"]), ipu_model_device)


def test_mixed_ai_onnx_opsets(ipu_model_device):
    # The original runs the largest version (willow/src/ir.cpp, getOpSetVersionFromModel).
    proto = one_node_model("Relu", opsets=(("", 11), ("ai.onnx", 9)))
    session = popart.InferenceSession(proto, popart.DataFlow(1, ["y"]), ipu_model_device)
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    x = np.array([-1.0, 2.0], np.float32)
    session.run(popart.PyStepIO({"x": x}, anchors))
    np.testing.assert_array_equal(anchors["y"], np.maximum(x, 0))


def test_input_without_a_full_shape_needs_input_shape_info(ipu_model_device):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 11)]
    ).SerializeToString()
    with pytest.raises(
        popart.popart_exception,
        match="Input tensor 'x' must be specified in InputShapeInfo, as it has shape \\[batch, 3\\]",
    ):
        popart.InferenceSession(proto, popart.DataFlow(1, ["y"]), ipu_model_device)
    shapes = popart.InputShapeInfo()
    shapes.add("x", popart.TensorInfo("FLOAT", [5, 3]))
    session = popart.InferenceSession(
        proto, popart.DataFlow(1, ["y"]), ipu_model_device, inputShapeInfo=shapes
    )
    assert session.initAnchorArrays()["y"].shape == (5, 3)


# -- anchors ---------------------------------------------------------------------------------


def test_anchor_that_does_not_exist(small_model, ipu_model_device):
    with pytest.raises(
        popart.popart_exception, match="Anchor tensor 'Relu:1' is not a tensor.*Relu:0"
    ):
        session_for(small_model, ipu_model_device, anchors=["Relu:1"])


def test_gradient_anchor_in_inference(small_model, ipu_model_device):
    gradient = popart.reservedGradientPrefix() + small_model.w
    with pytest.raises(popart.popart_exception, match="only a TrainingSession computes gradients"):
        session_for(small_model, ipu_model_device, anchors=[gradient])


def test_inference_needs_an_anchor(small_model, ipu_model_device):
    with pytest.raises(popart.popart_exception, match="User must specify an anchor tensor"):
        session_for(small_model, ipu_model_device, anchors=[])


# -- step IO ---------------------------------------------------------------------------------


@pytest.fixture
def prepared(small_model, ipu_model_device):
    session = session_for(small_model, ipu_model_device, batches_per_step=2)
    session.prepareDevice()
    return session


def test_input_with_the_wrong_number_of_elements(small_model, prepared):
    anchors = prepared.initAnchorArrays()
    stepio = popart.PyStepIO({small_model.x: np.zeros((2, 3, 4), np.float32)}, anchors)
    with pytest.raises(
        popart.popart_exception,
        match=r"Unexpected number of input elements for Tensor x\. Expected 16, but received 24.*"
        r"shape \[2, 3, 4\].*expected an array of shape \[2, 2, 4\]",
    ):
        prepared.run(stepio)


def test_only_the_element_count_of_an_input_is_checked(small_model, prepared):
    anchors = prepared.initAnchorArrays()
    flat = np.arange(16, dtype=np.float32)
    prepared.run(popart.PyStepIO({small_model.x: flat}, anchors))
    np.testing.assert_allclose(
        anchors[small_model.y],
        np.maximum(
            flat.reshape(2, 2, 4) @ small_model.weights[small_model.w]
            + small_model.weights[small_model.b],
            0,
        ),
        rtol=1e-5,
    )


def test_input_with_the_wrong_dtype(small_model, prepared):
    stepio = popart.PyStepIO({small_model.x: np.zeros((2, 2, 4))}, prepared.initAnchorArrays())
    with pytest.raises(
        popart.popart_exception, match="tensor 'x' has dtype float64, but the tensor is float32"
    ):
        prepared.run(stepio)


def test_missing_and_unknown_inputs(small_model, prepared):
    anchors = prepared.initAnchorArrays()
    with pytest.raises(popart.popart_exception, match="No tensor x provided in PyStepIO's inputs"):
        prepared.run(popart.PyStepIO({}, anchors))
    stepio = popart.PyStepIO(
        {small_model.x: np.zeros((2, 2, 4), np.float32), "z": np.zeros(3, np.float32)}, anchors
    )
    with pytest.raises(popart.popart_exception, match="'z' has been provided.*not registered"):
        prepared.run(stepio)


def test_missing_and_wrong_sized_outputs(small_model, prepared):
    x = {small_model.x: np.zeros((2, 2, 4), np.float32)}
    with pytest.raises(
        popart.popart_exception, match="No tensor Relu:0 provided in PyStepIO's outputs"
    ):
        prepared.run(popart.PyStepIO(x, {}))
    wrong = {small_model.y: np.zeros((2, 3), np.float32)}
    with pytest.raises(
        popart.popart_exception, match="Unexpected number of output elements.*initAnchorArrays"
    ):
        prepared.run(popart.PyStepIO(x, wrong))


def test_runtime_asserts_off_wraps_buffers(small_model, prepared):
    anchors = {small_model.y: np.zeros((2, 3), np.float32)}
    stepio = popart.PyStepIO({small_model.x: np.ones(8, np.float32)}, anchors)
    stepio.enableRuntimeAsserts(False)
    prepared.run(stepio)  # half the input is read twice; the second batch overwrites the first
    expected = np.maximum(
        np.ones((2, 4)) @ small_model.weights[small_model.w] + small_model.weights[small_model.b], 0
    )
    np.testing.assert_allclose(anchors[small_model.y], expected, rtol=1e-5)


def test_stepio_arguments_are_checked(small_model, prepared):
    with pytest.raises(TypeError, match="two dicts"):
        popart.PyStepIO([1], {})
    with pytest.raises(TypeError, match="must be a numpy array"):
        popart.PyStepIO({}, {small_model.y: [1, 2]})
    with pytest.raises(TypeError, match="four callables"):
        popart.PyStepIOCallback(None, None, None, None)
    with pytest.raises(TypeError, match="run stepio"):
        prepared.run({"x": 1})


def test_callback_input_of_the_wrong_size(small_model, prepared):
    stepio = popart.PyStepIOCallback(
        lambda tensor_id, prefetch: np.zeros(3, np.float32),
        lambda tensor_id: None,
        lambda tensor_id: np.zeros((2, 3), np.float32),
        lambda tensor_id: None,
    )
    with pytest.raises(popart.popart_exception, match="Tensor x from input_callback. Expected 8"):
        prepared.run(stepio)


# -- arguments and devices -------------------------------------------------------------------


def test_session_argument_types(small_model, ipu_model_device):
    data_flow = popart.DataFlow(1, [small_model.y])
    with pytest.raises(popart.popart_exception, match="Must pass a valid deviceInfo"):
        popart.InferenceSession(small_model.proto, data_flow, None)
    with pytest.raises(TypeError, match="dataFlow must be a DataFlow"):
        popart.InferenceSession(small_model.proto, {"y": 1}, ipu_model_device)
    with pytest.raises(TypeError, match="userOptions must be a SessionOptions"):
        popart.InferenceSession(small_model.proto, data_flow, ipu_model_device, userOptions={})
    with pytest.raises(TypeError, match="patterns must be a Patterns"):
        popart.InferenceSession(small_model.proto, data_flow, ipu_model_device, patterns="All")


def test_offline_and_never_connected_devices_compile_but_do_not_run(small_model):
    manager = popart.DeviceManager()
    offline = manager.createOfflineIPUDevice({"numIPUs": 1})
    session = session_for(small_model, offline)
    session.prepareDevice()  # compiling works offline
    with pytest.raises(
        popart.popart_exception, match="Offline IPU device is not configured for execution"
    ):
        session.run(popart.PyStepIO({}, session.initAnchorArrays()))
    never = manager.enumerateDevices(connectionType=popart.DeviceConnectionType.Never)[0]
    session = session_for(small_model, never)
    session.prepareDevice()
    with pytest.raises(popart.popart_exception, match="DeviceConnectionType.Never"):
        session.run(popart.PyStepIO({}, session.initAnchorArrays()))


def test_mandatory_patterns_cannot_be_disabled_silently(small_model, ipu_model_device):
    patterns = popart.Patterns(popart.PatternsLevel.NoPatterns)
    with pytest.raises(popart.popart_exception, match="must be enabled.*MatMulOp"):
        session_for(small_model, ipu_model_device, patterns=patterns)
    session_for(small_model, ipu_model_device, patterns=patterns.enableRuntimeAsserts(False))


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"enableGradientAccumulation": True},
            "Gradient Accumulation only available when training",
        ),
        (
            {"accumulationFactor": 4},
            "accumulationFactor is 4, but enableGradientAccumulation is False",
        ),
        (
            {"enableReplicatedGraphs": True, "enableDistributedReplicatedGraphs": True},
            "Local replicated graphs enabled but replication factor is 1",
        ),
        (
            {"enableReplicatedGraphs": True, "replicatedGraphCount": 3},
            "number of IPUs must be divisible by the replication factor",
        ),
        (
            {"enableReplicatedGraphs": True, "replicatedGraphCount": 0},
            "replicatedGraphCount must be >= 1",
        ),
        ({"partialsTypeMatMuls": "double"}, "from string .double.. Possible values are"),
        (
            {"virtualGraphMode": popart.VirtualGraphMode.Auto, "virtualGraphSplitRatios": [1.5]},
            "each ratio must be in",
        ),
        ({"defaultBufferingDepth": 0}, "Unable to support a buffering depth of 0 for tensor"),
        (
            {"rearrangeStreamsOnHost": True, "bufferingDepthMap": {"x": 2}},
            "Unable to support a buffering depth >1 for tensor x",
        ),
        ({"serializedPoprithmsShiftGraphsDir": "/no/such/dir"}, "not an existing directory"),
        ({"enablePipelining": True}, "Pipelining requires more than 1 IPU"),
        ({"virtualGraphMode": popart.VirtualGraphMode.Manual}, "but no Ops have been annotated"),
        (
            {"enableDistributedReplicatedGraphs": True, "globalReplicationFactor": 0},
            "globalReplicationFactor must be > 0",
        ),
    ],
)
def test_option_rules(small_model, ipu_model_device, settings, message):
    options = popart.SessionOptions()
    for name, value in settings.items():
        setattr(options, name, value)
    with pytest.raises(popart.popart_exception, match=message):
        session_for(small_model, ipu_model_device, userOptions=options)


def test_pipelining_needs_enough_batches_per_step(ipu_model_device):
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    with builder.virtualGraph(0), builder.pipelineStage(0):
        h = builder.aiOnnx.relu([x])
    with builder.virtualGraph(1), builder.pipelineStage(1):
        y = builder.aiOnnx.neg([h])
    builder.addOutputTensor(y)
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 2})
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    proto = builder.getModelProto()
    with pytest.raises(
        popart.popart_exception,
        match=r"depth \(batchesPerStep\) must equal at least the number of pipeline stages \(2\)",
    ):
        popart.InferenceSession(proto, popart.DataFlow(1, [y]), device, userOptions=options)
    session = popart.InferenceSession(proto, popart.DataFlow(2, [y]), device, userOptions=options)
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: np.array([[1, -1], [-2, 2]], np.float32)}, anchors))
    np.testing.assert_array_equal(anchors[y], [[-1, 0], [0, -2]])


def test_options_are_copied_when_the_session_is_created(small_model, ipu_model_device):
    options = popart.SessionOptions()
    session = session_for(small_model, ipu_model_device, userOptions=options)
    options.enableReplicatedGraphs = True  # would be invalid for the session
    session.prepareDevice()
    assert session.replicationFactor == 1


def test_model_changes_after_creation_do_not_reach_the_session(small_model, ipu_model_device):
    model = onnx.load_model_from_string(small_model.proto)
    session = popart.InferenceSession(model, popart.DataFlow(1, [small_model.y]), ipu_model_device)
    del model.graph.node[:]
    session.prepareDevice()
    assert session.initAnchorArrays()[small_model.y].shape == (2, 3)
