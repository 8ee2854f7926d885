"""Sharding, pipelining and recomputation in training: ops placed on the device's emulated
IPUs, the annotations and options kept, and the numbers those of the same model on one IPU
(which the accumulation tests check against numpy)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import popart

ACCUMULATION, BATCHES_PER_STEP, RUNS = 4, 2, 2


def two_layer_model(annotate: bool, recompute: bool = False):
    """x [4, 3] -> relu(x @ w1) on IPU 0 (stage 0) -> @ w2 + b on IPU 1 (stage 1) -> mse."""
    rng = np.random.default_rng(5)
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 3]), "x")
    t = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 2]), "t")
    w1 = builder.addInitializedInputTensor(rng.normal(size=(3, 5)).astype(np.float32), "w1")
    w2 = builder.addInitializedInputTensor(rng.normal(size=(5, 2)).astype(np.float32), "w2")
    b = builder.addInitializedInputTensor(np.zeros(2, np.float32), "b")

    def on(ipu):
        if not annotate:
            return _Nothing()
        return _Both(builder.virtualGraph(ipu), builder.pipelineStage(ipu))

    with on(0):
        hidden = builder.aiOnnx.relu([builder.aiOnnx.matmul([x, w1])])
    if recompute:
        builder.recomputeOutputInBackwardPass(hidden)
    with on(1):
        y = builder.aiOnnx.add([builder.aiOnnx.matmul([hidden, w2]), b])
        difference = builder.aiOnnx.sub([y, t])
        loss = builder.aiGraphcore.identityloss(
            [builder.aiOnnx.mul([difference, difference])], reduction=popart.ReductionType.Mean
        )
    return builder.getModelProto(), x, t, hidden, loss


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


class _Both:
    def __init__(self, *contexts):
        self._contexts = contexts

    def __enter__(self):
        for context in self._contexts:
            context.__enter__()
        return self

    def __exit__(self, *exc_info):
        for context in reversed(self._contexts):
            context.__exit__(*exc_info)
        return False


def data(replicas=1):
    rng = np.random.default_rng(1)
    shape = [RUNS, BATCHES_PER_STEP, ACCUMULATION] + ([replicas] if replicas > 1 else [])
    return (
        rng.normal(size=[*shape, 4, 3]).astype(np.float32),
        rng.normal(size=[*shape, 4, 2]).astype(np.float32),
    )


def train(proto, x_id, t_id, loss, options, ipus, replicas=1):
    options.enableGradientAccumulation = True
    options.accumulationFactor = ACCUMULATION
    if replicas > 1:
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = replicas
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": ipus})
    optimizer = popart.SGD({"defaultLearningRate": (0.05, True), "defaultMomentum": (0.5, True)})
    session = popart.TrainingSession(
        proto,
        popart.DataFlow(BATCHES_PER_STEP, {loss: popart.AnchorReturnType("All")}),
        loss,
        optimizer,
        device,
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    x, t = data(replicas)
    losses = []
    for run in range(RUNS):
        arrays = session.initAnchorArrays()
        session.run(popart.PyStepIO({x_id: x[run], t_id: t[run]}, arrays))
        losses.append(arrays[loss].copy())
    session.weightsToHost()
    weights = {name: np.zeros_like(value) for name, value in initial_weights(proto).items()}
    session.readWeights(popart.PyWeightsIO(weights))
    return session, device, np.array(losses), weights


def initial_weights(proto):
    model = onnx.load_model_from_string(proto)
    return {init.name: onnx.numpy_helper.to_array(init) for init in model.graph.initializer}


@pytest.fixture(scope="module")
def unpipelined():
    proto, x, t, _, loss = two_layer_model(annotate=False)
    _, _, losses, weights = train(proto, x, t, loss, popart.SessionOptions(), ipus=1)
    for name, value in initial_weights(proto).items():
        assert not np.allclose(weights[name], value)  # it trained
    return losses, weights


def assert_same_training(result, reference):
    losses, weights = result
    np.testing.assert_allclose(losses, reference[0], rtol=1e-5, atol=1e-6)
    for name, value in reference[1].items():
        np.testing.assert_allclose(weights[name], value, rtol=1e-5, atol=1e-6)


def test_pipelined_training_with_recomputation_equals_unpipelined(unpipelined, tmp_path):
    proto, x, t, hidden, loss = two_layer_model(annotate=True, recompute=True)
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    # (Automatic recomputation would not mix with the annotation: willow/src/ir.cpp.)
    session, device, losses, weights = train(proto, x, t, loss, options, ipus=2)
    assert_same_training((losses, weights), unpipelined)
    # Kept: the options, and the annotations in the model the session writes.
    kept = session.getIr().getSessionOptions()
    assert kept.enablePipelining and kept.virtualGraphMode == popart.VirtualGraphMode.Manual
    path = tmp_path / "pipelined.onnx"
    session.modelToHost(str(path))
    written = {node.output[0]: node for node in onnx.load_model(str(path)).graph.node}
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in written[hidden].attribute}
    assert attributes["__ipu_number"] == 0 and attributes["__pipeline_stage"] == 0
    assert attributes["__recompute_output_in_backward_pass"] == int(popart.RecomputeType.Recompute)
    # Placed: each op ran on the host device of its virtual graph's IPU.
    ops = {op["outputs"][0]: op for op in json.loads(session.getSerializedGraph())["ops"]}
    assert ops[hidden]["device"] == device.host_device_of(0)
    assert ops[loss]["device"] == device.host_device_of(1) != device.host_device_of(0)
    assert ops[loss]["pipelineStage"] == 1
    # The backward pass too: the gradient of the Relu (IPU 0) and of the Sub (IPU 1).
    (gradients,) = json.loads(session.getSerializedGraph())["gradientDevices"]
    by_type = {name.rsplit("/", 1)[1]: where for name, where in gradients.items()}
    assert by_type["ReluGrad"] == device.host_device_of(0)
    assert by_type["Neg"] == device.host_device_of(1)


def test_sharded_training_equals_one_ipu(unpipelined):
    proto, x, t, hidden, loss = two_layer_model(annotate=True)
    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    session, device, losses, weights = train(proto, x, t, loss, options, ipus=2)
    assert_same_training((losses, weights), unpipelined)
    ops = {op["outputs"][0]: op for op in json.loads(session.getSerializedGraph())["ops"]}
    assert (ops[hidden]["virtualGraph"], ops[loss]["virtualGraph"]) == (0, 1)


def test_auto_virtual_graphs_split_the_ops_over_the_ipus(unpipelined):
    proto, x, t, _, loss = two_layer_model(annotate=False)
    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Auto
    options.autoRecomputation = popart.RecomputationType.Standard
    session, device, losses, weights = train(proto, x, t, loss, options, ipus=2)
    assert_same_training((losses, weights), unpipelined)
    ops = json.loads(session.getSerializedGraph())["ops"]
    graphs = [op["virtualGraph"] for op in ops]
    # The original's split (willow/src/transforms/auto_virtual_graph.cpp): the ops' costs
    # in bytes (weights, and the forward tensors their grad ops read) are 108 (x @ w1),
    # 80 (relu), 120 (@ w2), 8 (+ b), 0 (- t), 64 (squared), 0 (loss): half of the 380 is
    # nearest after the relu (188).
    assert graphs == [0, 0, 1, 1, 1, 1, 1]
    assert {op["device"] for op in ops} == {device.host_device_of(0), device.host_device_of(1)}


@pytest.mark.slow
def test_sharded_inference_equals_one_ipu():
    plain, x, t, _, loss = two_layer_model(annotate=False)
    sharded, *_ = two_layer_model(annotate=True)
    inputs, targets = (value[0] for value in data())

    def infer(proto, ipus, options):
        session = popart.InferenceSession(
            proto,
            popart.DataFlow(BATCHES_PER_STEP, {loss: popart.AnchorReturnType("All")}),
            popart.DeviceManager().createIpuModelDevice({"numIPUs": ipus}),
            userOptions=options,
        )
        session.prepareDevice()
        session.weightsFromHost()
        arrays = session.initAnchorArrays()
        session.run(
            popart.PyStepIO(
                {x: np.ascontiguousarray(inputs[:, 0]), t: np.ascontiguousarray(targets[:, 0])},
                arrays,
            )
        )
        return arrays[loss]

    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    options.enablePipelining = True
    weights = initial_weights(plain)
    hidden = np.maximum(inputs[:, 0] @ weights["w1"], 0)
    expected = np.mean((hidden @ weights["w2"] + weights["b"] - targets[:, 0]) ** 2, axis=(1, 2))
    np.testing.assert_allclose(infer(sharded, 2, options), expected, rtol=1e-5)
    np.testing.assert_allclose(infer(plain, 1, popart.SessionOptions()), expected, rtol=1e-5)


@pytest.mark.slow
def test_replicated_pipelined_training_equals_replicated_on_one_ipu_each():
    plain, x, t, _, loss = two_layer_model(annotate=False)
    _, _, *reference = train(plain, x, t, loss, popart.SessionOptions(), ipus=2, replicas=2)
    proto, x, t, hidden, loss = two_layer_model(annotate=True)
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    session, device, *result = train(proto, x, t, loss, options, ipus=4, replicas=2)
    assert_same_training(result, reference)
    ops = {op["outputs"][0]: op for op in json.loads(session.getSerializedGraph())["ops"]}
    # Replica r runs virtual graph k on the device's IPU 2 r + k.
    assert ops[hidden]["replicaDevices"] == [device.host_device_of(0), device.host_device_of(2)]
    assert ops[loss]["replicaDevices"] == [device.host_device_of(1), device.host_device_of(3)]
    gradients = json.loads(session.getSerializedGraph())["gradientDevices"]
    relu_gradients = [
        next(where for name, where in replica.items() if name.endswith("/ReluGrad"))
        for replica in gradients
    ]
    assert relu_gradients == [device.host_device_of(0), device.host_device_of(2)]


def test_auto_virtual_graphs_follow_the_split_ratios():
    proto, x, t, _, loss = two_layer_model(annotate=False)

    def graphs(ratios, ipus=2):
        options = popart.SessionOptions()
        options.virtualGraphMode = popart.VirtualGraphMode.Auto
        options.virtualGraphSplitRatios = ratios
        session = popart.TrainingSession(
            proto, popart.DataFlow(1, {}), loss, popart.SGD({}),
            popart.DeviceManager().createIpuModelDevice({"numIPUs": ipus}), userOptions=options,
        )  # fmt: skip
        session.prepareDevice()
        return [op["virtualGraph"] for op in json.loads(session.getSerializedGraph())["ops"]]

    # The split points nearest 25% of the cost (95 of 380 bytes: after the first matmul,
    # 108), then 20% and 40% (76 and 152: after the matmul, then after the relu, 188).
    assert graphs([0.25, 0.75]) == [0, 1, 1, 1, 1, 1, 1]
    assert graphs([0.2, 0.2, 0.6], ipus=3) == [0, 1, 2, 2, 2, 2, 2]
    with pytest.raises(popart.popart_exception, match="virtualGraphSplitRatios .* has 3 ratio"):
        graphs([0.2, 0.2, 0.6])


def test_auto_pipelines_have_one_stage_per_ipu():
    proto, x, t, _, loss = two_layer_model(annotate=False)
    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Auto
    options.enablePipelining = True
    options.enableGradientAccumulation = True
    options.accumulationFactor = 2
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 3})
    with pytest.raises(
        popart.popart_exception,
        # Three forward stages and the backward pass's two more (willow/src/ir.cpp).
        match=r"depth \(gradient accumulation factor\) must equal at least the number of "
        r"pipeline stages \(5\)",
    ):
        popart.TrainingSession(proto, popart.DataFlow(1, {}), loss, popart.SGD({}), device,
                               userOptions=options)  # fmt: skip


def _train_without_accumulation(proto, x_id, t_id, loss, options, ipus, batches_per_step):
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": ipus})
    session = popart.TrainingSession(
        proto,
        popart.DataFlow(batches_per_step, {loss: popart.AnchorReturnType("All")}),
        loss,
        popart.SGD({"defaultLearningRate": (0.05, True)}),
        device,
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    rng = np.random.default_rng(7)
    x = rng.normal(size=[batches_per_step, 4, 3]).astype(np.float32)
    t = rng.normal(size=[batches_per_step, 4, 2]).astype(np.float32)
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO({x_id: x, t_id: t}, arrays))
    session.weightsToHost()
    weights = {name: np.zeros_like(value) for name, value in initial_weights(proto).items()}
    session.readWeights(popart.PyWeightsIO(weights))
    return arrays[loss], weights


def test_continuous_pipelining_trains_without_gradient_accumulation():
    # willow/src/transforms/pipeline.cpp `PipelineInfo`: without gradient accumulation the
    # pipeline fills over the batches of a step (at least one per stage), and each batch
    # updates the weights, as the unpipelined model does.
    plain, x, t, _, loss = two_layer_model(annotate=False)
    reference = _train_without_accumulation(
        plain, x, t, loss, popart.SessionOptions(), ipus=1, batches_per_step=3
    )
    proto, x, t, _, loss = two_layer_model(annotate=True)
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    losses, weights = _train_without_accumulation(
        proto, x, t, loss, options, ipus=2, batches_per_step=3
    )
    np.testing.assert_allclose(losses, reference[0], rtol=1e-5, atol=1e-6)
    for name, value in reference[1].items():
        np.testing.assert_allclose(weights[name], value, rtol=1e-5, atol=1e-6)
    # One batch per step cannot fill a pipeline of two forward stages and a backward one.
    with pytest.raises(popart.popart_exception, match=r"depth \(batchesPerStep\).*stages \(3\)"):
        popart.TrainingSession(
            proto,
            popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}),
            loss,
            popart.SGD({"defaultLearningRate": (0.05, True)}),
            popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
            userOptions=options,
        )
