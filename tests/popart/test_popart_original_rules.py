"""Inputs the original PopART accepts: user programs that must run, with the right numbers,
where the emulation once raised an error the original does not have."""

import numpy as np
import onnx
import pytest
from small_model import build_small_model, reference_outputs

import popart


def small_model_session(model, options: popart.SessionOptions, **kwargs):
    session = popart.InferenceSession(
        model.proto,
        popart.DataFlow(1, [model.y]),
        popart.DeviceManager().createIpuModelDevice({}),
        userOptions=options,
        **kwargs,
    )
    session.prepareDevice()
    return session


def run_small_model(options: popart.SessionOptions, **kwargs) -> None:
    model = build_small_model()
    session = small_model_session(model, options, **kwargs)
    anchors = session.initAnchorArrays()
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 4 - 1
    session.run(popart.PyStepIO({model.x: x}, anchors))
    np.testing.assert_allclose(anchors[model.y], reference_outputs(model, x)[model.y], rtol=1e-5)


def options_with(**settings) -> popart.SessionOptions:
    options = popart.SessionOptions()
    for name, value in settings.items():
        setattr(options, name, value)
    return options


@pytest.mark.parametrize(
    "settings",
    [
        # Anchors are rearranged on the host by default: they keep depth 1 (sessionoptions.cpp).
        {"defaultBufferingDepth": 2},
        {"defaultBufferingDepth": 3, "rearrangeStreamsOnHost": True},
        # Entries for tensors that are not streamed are never read.
        {"bufferingDepthMap": {"not_a_tensor": 0}},
        {"bufferingDepthMap": {"x": 2}},
        # A count of 1 is refused only with distributed replicated graphs (ir.cpp).
        {"enableReplicatedGraphs": True},
        # Read only with enableReplicatedGraphs / enableDistributedReplicatedGraphs.
        {"replicatedGraphCount": 0},
        {"globalReplicationFactor": 0},
        # Read by the AutoVirtualGraph transform only (virtualGraphMode Auto).
        {"virtualGraphSplitRatios": [0.5, 1.5]},
    ],
)
def test_options_the_original_accepts(settings):
    run_small_model(options_with(**settings))


def test_negative_batch_serialization_factor_is_no_serialization():
    options = popart.SessionOptions()
    options.batchSerializationSettings.factor = -1
    run_small_model(options)


def test_partials_type_is_read_only_by_matmuls():
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    y = builder.aiOnnx.relu([x])
    builder.addOutputTensor(y)
    options = options_with(partialsTypeMatMuls="double")
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, [y]),
        popart.DeviceManager().createIpuModelDevice({}),
        userOptions=options,
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: np.array([-1, 0, 2], np.float32)}, anchors))
    np.testing.assert_array_equal(anchors[y], [0, 0, 2])
    # A MatMul with its own partials type does not read the option either.
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    a = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]), "a")
    product = builder.aiOnnx.matmul([a, a])
    builder.setPartialsType(product, "FLOAT")
    builder.addOutputTensor(product)
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, [product]),
        popart.DeviceManager().createIpuModelDevice({}),
        userOptions=options,
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    value = np.array([[1, 2], [3, 4]], np.float32)
    session.run(popart.PyStepIO({a: value}, anchors))
    np.testing.assert_allclose(anchors[product], value @ value)


def test_reset_host_weights_reads_only_the_initializers():
    model = build_small_model()
    session = small_model_session(model, options_with(constantWeights=False))
    # Another model, other ops, holding only a new value of the weight 'w'.
    builder = popart.Builder()
    new_w = np.full((4, 3), 0.5, np.float32)
    w = builder.addInitializedInputTensor(new_w, model.w)
    builder.addOutputTensor(builder.aiOnnx.neg([w]))
    other = onnx.load_model_from_string(builder.getModelProto())
    assert [tensor.name for tensor in other.graph.initializer] == [model.w]
    session.resetHostWeights(other.SerializeToString())
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    x = np.ones((2, 4), np.float32)
    session.run(popart.PyStepIO({model.x: x}, anchors))
    weights = {model.w: new_w, model.b: model.weights[model.b]}
    np.testing.assert_allclose(
        anchors[model.y], reference_outputs(model, x, weights)[model.y], rtol=1e-5
    )


def test_set_batches_per_step_is_not_checked_by_the_setter():
    # willow/include/popart/dataflow.hpp: only the constructor checks the value.
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    y = builder.aiOnnx.neg([x])
    builder.addOutputTensor(y)
    flow = popart.DataFlow(1, [y])
    flow.setBatchesPerStep(0)
    assert flow.batchesPerStep() == 0
    flow.setBatchesPerStep(2)
    session = popart.InferenceSession(
        builder.getModelProto(), flow, popart.DeviceManager().createIpuModelDevice({})
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    data = np.array([[1, -2], [3, 4]], np.float32)
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_array_equal(anchors[y], -data)
    with pytest.raises(popart.popart_exception, match="'Batches per step' must be greater"):
        popart.DataFlow(0, [y])
    # A session cannot run steps of no batches: a clear error, not a crash.
    flow.setBatchesPerStep(0)
    with pytest.raises(popart.popart_exception, match="'Batches per step' must be greater"):
        popart.InferenceSession(
            builder.getModelProto(), flow, popart.DeviceManager().createIpuModelDevice({})
        )


def test_offline_ipu_takes_the_gateway_mode_option():
    device = popart.DeviceManager().createOfflineIPUDevice(
        {"numIPUs": 2, "ipuVersion": "ipu2", "gatewayMode": "false"}
    )
    assert device.numIpus == 2
    assert device.type == popart.DeviceType.OfflineIpu


def test_negative_attach_timeout_is_a_type_error():
    # setOnDemandAttachTimeout(const unsigned): pybind11 refuses a negative int.
    with pytest.raises(TypeError):
        popart.DeviceManager().setOnDemandAttachTimeout(-1)
