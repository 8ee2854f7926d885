"""graphcore/popart tests/integration/pipelining_tests/pipeline_full_recompute_test.py: a model
pipelined over three IPUs trains to the same anchors with Standard and Pipeline
recomputation as without; a training session's forward-only program
(`createImplicitPipeliningFwdOnlyProgram`) gives a separate inference session's anchors and
leaves the weights and the training that follows untouched; the IR scenarios (stashes
restored in place, no copies of weight views) read the serialised IR (IpuModel2). The
original's models of the first two are attention layers; these are smaller matmul-softmax
layers."""

import copy
import json

import numpy as np
import pytest

import popart
from conftest import create_test_device

HIDDEN = 8
BATCHES_PER_STEP = 2
ACCUMULATION = 7  # the forward-only program keeps 2 x 3 stages apart


def _model():
    np.random.seed(1337)
    weight_data = np.random.normal(0, 0.5, [HIDDEN, HIDDEN]).astype(np.float32)
    builder = popart.Builder()
    x_in = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, HIDDEN]), "x_in")
    weights = [builder.addInitializedInputTensor(weight_data, f"w{n}") for n in range(3)]
    o = x_in
    for stage, weight in enumerate(weights):
        with builder.virtualGraph(stage), builder.pipelineStage(stage):
            o = builder.aiOnnx.softmax([builder.aiOnnx.matmul([o, weight])], axis=1)
            if stage == 2:
                l1 = builder.aiGraphcore.l1loss([o], 0.1)
    return builder, x_in, weights, o, l1


def _options(recomputation=None, forward_only=False):
    options = popart.SessionOptions()
    options.enableOutlining = False
    options.enablePipelining = True
    options.enableGradientAccumulation = True
    options.accumulationFactor = ACCUMULATION
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    if recomputation is not None:
        options.autoRecomputation = recomputation
    options.createImplicitPipeliningFwdOnlyProgram = forward_only
    return options


def _training_session(builder, anchors, loss, options, device):
    return popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(BATCHES_PER_STEP, anchors),
        userOptions=options,
        loss=loss,
        optimizer=popart.ConstSGD(1),
        deviceInfo=device,
    )


def _weights(session, weights):
    values = {w: np.empty([HIDDEN, HIDDEN], np.float32) for w in weights}
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO(values))
    return values


def _data():
    rng = np.random.default_rng(3)
    shape = [BATCHES_PER_STEP, ACCUMULATION, 2, HIDDEN]
    return rng.normal(0, 1, shape).astype(np.float32)


def _train(recomputation):
    builder, x_in, weights, o, l1 = _model()
    g = popart.reservedGradientPrefix()
    device = create_test_device("IpuModel2", 3)
    try:
        session = _training_session(
            builder, [o, l1, *(g + w for w in weights)], l1, _options(recomputation), device
        )
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({x_in: _data()}, anchors))
        return anchors, _weights(session, weights)
    finally:
        device.detach()


@pytest.mark.follows("test_full_recompute_pipelining")
def test_full_recompute_pipelining_numbers():
    plain = _train(None)
    for mode in (popart.RecomputationType.Standard, popart.RecomputationType.Pipeline):
        anchors, weights = _train(mode)
        for key, value in plain[0].items():
            np.testing.assert_allclose(anchors[key], value, rtol=1e-5, atol=1e-7, err_msg=key)
        for key, value in plain[1].items():
            np.testing.assert_allclose(weights[key], value, rtol=1e-5, atol=1e-7, err_msg=key)


@pytest.mark.follows("test_full_recompute_pipelining")
def test_full_recompute_pipelining():
    builder, _, _, o, l1 = _model()
    device = create_test_device("IpuModel2", 3)
    try:
        options = _options(popart.RecomputationType.Pipeline)
        session = _training_session(builder, [o], l1, options, device)
        ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    finally:
        device.detach()
    types = [op["type"] for op in ir["maingraph"]]
    # As the original: the stage inputs that a later stage on the same IPU needs are stashed
    # (the stream input, the first stage's result copied to the second IPU; the third
    # stage's backward pass runs right after its forward pass, on its IPU), the rest is
    # recomputed; the stashes are restored in place (the original counts in-place ops of its
    # model, RestoreInplace among them).
    stashed = {op["inputs"][0]["name"] for op in ir["maingraph"] if op["type"] == "Stash"}
    assert len(stashed) == 2 and "x_in" in stashed
    assert [name for name in stashed if name.endswith("_c1")]
    assert types.count("RestoreInplace") == 2
    assert any("Inplace" in t for t in types if t != "RestoreInplace")


@pytest.mark.follows("test_implicit_pipelining_custom_fwd_only")
def test_implicit_pipelining_custom_fwd_only():
    builder, x_in, weights, o, l1 = _model()
    data = _data()

    def run(forward_only):
        device = create_test_device("IpuModel2", 3)
        try:
            session = _training_session(
                builder, [o, l1], l1, _options(popart.RecomputationType.Pipeline, forward_only),
                device,
            )  # fmt: skip
            session.prepareDevice()
            session.weightsFromHost()
            anchors = session.initAnchorArrays()
            stepio = popart.PyStepIO({x_in: data}, anchors)
            session.run(stepio)
            trained_once = _weights(session, weights)
            if forward_only:
                session.run("implicitPipeliningFwdOnly", stepio)
            else:  # a separate inference session with the trained weights
                options = _options()
                options.enableGradientAccumulation = False
                options.accumulationFactor = 1
                options.constantWeights = False
                flow = popart.DataFlow(BATCHES_PER_STEP * ACCUMULATION, [o, l1])
                inference_device = create_test_device("IpuModel2", 3)
                try:
                    inference = popart.InferenceSession(
                        fnModel=builder.getModelProto(), dataFlow=flow, userOptions=options,
                        deviceInfo=inference_device,
                    )  # fmt: skip
                    inference.prepareDevice()
                    inference.writeWeights(popart.PyWeightsIO(trained_once))
                    inference.weightsFromHost()
                    inference_anchors = inference.initAnchorArrays()
                    inference.run(
                        popart.PyStepIO({x_in: data.reshape(-1, 2, HIDDEN)}, inference_anchors)
                    )
                finally:
                    inference_device.detach()
                anchors = {k: v.reshape(anchors[k].shape) for k, v in inference_anchors.items()}
            forward = copy.deepcopy(anchors)
            untouched = _weights(session, weights)
            session.run(popart.PyStepIO({x_in: data}, session.initAnchorArrays()))
            trained_twice = _weights(session, weights)
        finally:
            device.detach()
        return trained_once, untouched, trained_twice, forward

    separate, within = run(False), run(True)
    for a, b in zip(separate, within, strict=True):
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-7, err_msg=key)
    # The forward-only run changed no weight.
    for key in within[0]:
        np.testing.assert_array_equal(within[0][key], within[1][key])


@pytest.mark.follows("test_implicit_pipelining_custom_fwd_only_no_copy")
def test_implicit_pipelining_custom_fwd_only_no_copy():
    """The original's model: two stages, each reading a reshaped (outplace) view of its
    weight, which is no reason for an IPU copy between the forward and backward passes."""
    size = 5
    data = np.random.default_rng(0).normal(0, 0.02, [size * size]).astype(np.float32)
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x_in = builder.addInputTensor(popart.TensorInfo("FLOAT", [size, size]), "x_in")
    weights = [builder.addInitializedInputTensor(data, f"w{n}") for n in range(2)]
    shapes = [builder.aiOnnx.constant(np.array([size, size], np.int64)) for _ in weights]
    o = x_in
    for stage, (weight, shape) in enumerate(zip(weights, shapes, strict=True)):
        with builder.virtualGraph(stage), builder.pipelineStage(stage):
            o = builder.aiOnnx.matmul([o, builder.aiOnnx.reshape([weight, shape])])
            if stage == 1:
                l1 = builder.aiGraphcore.l1loss([o], 0.1)
    options = _options(popart.RecomputationType.Pipeline, forward_only=True)
    options.accumulationFactor = 4
    device = create_test_device("IpuModel2", 3)
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(2, [o, l1]),
            userOptions=options,
            loss=l1,
            optimizer=popart.ConstSGD(1),
            patterns=popart.Patterns(popart.PatternsLevel.Default),
            deviceInfo=device,
        )
        session.prepareDevice()
        ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    finally:
        device.detach()
    # The activation forward and its gradient back: two copies.
    copies = [op for graph in ir.values() for op in graph if op["type"] == "IpuCopy"]
    assert len(copies) == 2
