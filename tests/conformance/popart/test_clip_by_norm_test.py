"""graphcore/popart tests/integration/clip_by_norm_test.py: gradient clipping by norm
(`ClipNormSettings`) of one or two groups of weights of a chain of convolutions, and of all
weights, for SGD, Adam, Lamb and LambNoBias, also with gradient accumulation on two IPUs
(pipelined or not), and with a serialised MatMul. The reference (the original's is torch):
TensorFlow's gradients, clipped in numpy, then one step of the optimizer in numpy (IpuModel)."""

import json

import numpy as np
import pytest
import tensorflow as tf

import popart

OPTIMIZERS = ["sgd", "adam", "lamb", "lambnobias"]


def _popart_optimizer(kind, clip):
    if kind == "sgd":
        return popart.SGD({"defaultLearningRate": (0.1, True)}, clip)
    if kind == "adam":
        values = {
            "defaultLearningRate": (0.1, False),
            "defaultBeta1": (0.9, False),
            "defaultBeta2": (0.999, False),
            "lossScaling": (20, False),
        }
        return popart.Adam(
            values,
            weight_decay_mode=popart.WeightDecayMode.L2Regularization,
            mode=popart.AdamMode.Adam,
            clip_norm_settings=clip,
        )
    values = {
        "defaultLearningRate": (0.01, False),
        "defaultBeta1": (0.9, False),
        "defaultBeta2": (0.999, False),
        "defaultEps": (1e-06, False),
        "defaultWeightDecay": (0.1, False),
        "lossScaling": (10, kind == "lambnobias"),
    }
    mode = popart.AdamMode.Lamb if kind == "lamb" else popart.AdamMode.LambNoBias
    return popart.Adam(
        values,
        scaled_optimizer_state=False,
        weight_decay_mode=popart.WeightDecayMode.Decay,
        mode=mode,
        clip_norm_settings=clip,
    )


def _numpy_step(kind, weight, gradient):
    """One first step (zero state) of each optimizer, as the original's torch ones take it."""
    if kind == "sgd":
        return weight - 0.1 * gradient
    if kind == "adam":  # its weight decay is 0 (the default), its eps 1e-6
        m, v = 0.1 * gradient, 0.001 * gradient**2
        return weight - 0.1 * (m / 0.1) / (np.sqrt(v / 0.001) + 1e-6)
    m, v = 0.1 * gradient, 0.001 * gradient**2
    if kind == "lamb":
        m, v = m / 0.1, v / 0.001
    update = m / (np.sqrt(v) + 1e-6) + 0.1 * weight
    trust = np.linalg.norm(weight) / np.linalg.norm(update)
    return weight - 0.01 * trust * update


def _conv_chain(data, weights):
    x = tf.transpose(data, [0, 2, 3, 1])  # NHWC for the CPU
    for w in weights:
        x = tf.nn.conv2d(x, tf.transpose(w, [2, 3, 1, 0]), 1, [[0, 0], [1, 1], [1, 1], [0, 0]])
    return tf.transpose(x, [0, 3, 1, 2])


def _reference(data, weights, groups, kind, factor=1):
    variables = [tf.constant(w) for w in weights]
    with tf.GradientTape() as tape:
        tape.watch(variables)
        result = _conv_chain(tf.constant(data), variables)
        loss = tf.reduce_mean(tf.abs(result))
    gradients = [g.numpy() * factor for g in tape.gradient(loss, variables)]
    for indices, max_norm in groups:
        norm = np.sqrt(sum(np.sum(gradients[i].astype(np.float64) ** 2) for i in indices))
        scale = min(1.0, max_norm / norm)
        for i in indices:
            gradients[i] = gradients[i] * scale
    updated = {
        f"weight{i}": _numpy_step(kind, w.astype(np.float64), g) for i, (w, g) in
        enumerate(zip(weights, gradients, strict=True))
    }  # fmt: skip
    return result.numpy(), updated


def _run_popart(data, weights, groups, kind, stages=None, factor=None, pipelining=False):
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo(data))
    ids = [builder.addInitializedInputTensor(w, f"weight{i}") for i, w in enumerate(weights)]
    stage_of = {i: s for s, members in enumerate(stages or ()) for i in members}
    x = d0
    for i, weight in enumerate(ids):
        x = builder.aiOnnxOpset9.conv(
            [x, weight], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1]
        )
        if stages:
            builder.pipelineStage(x, stage_of[i])
            builder.virtualGraph(x, stage_of[i])
    out = builder.aiGraphcore.l1loss([x], 1.0)
    if stages:
        builder.pipelineStage(out, len(stages) - 1)
        builder.virtualGraph(out, len(stages) - 1)
    options = popart.SessionOptions()
    if stages:
        options.virtualGraphMode = popart.VirtualGraphMode.Manual
        options.accumulationFactor = factor
        options.enableGradientAccumulation = True
        options.enablePipelining = pipelining
    clip = [popart.ClipNormSettings.clipWeights([ids[i] for i in idx], n) for idx, n in groups]
    session = popart.TrainingSession(
        builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {x: popart.AnchorReturnType("All")}),
        loss=out,
        optimizer=_popart_optimizer(kind, clip),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": len(stages or [0])}),
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({d0: np.array([data] * factor) if stages else data}, anchors))
    session.weightsToHost()
    result = {f"weight{i}": np.empty(w.shape, w.dtype) for i, w in enumerate(weights)}
    session.readWeights(popart.PyWeightsIO(result))
    return anchors[x], result


def _compare(kind, count, groups, **pipeline):
    np.random.seed(0)
    data = np.random.rand(1, 1, 8, 8).astype(np.float32)
    weights = [np.random.rand(1, 1, 2, 2).astype(np.float32) for _ in range(count)]
    result, updated = _run_popart(data, weights, groups, kind, **pipeline)
    expected, reference = _reference(data, weights, groups, kind, pipeline.get("factor", 1))
    if pipeline:
        result = result[1]
    np.testing.assert_allclose(result, expected, rtol=1e-5)
    for name, weight in updated.items():
        np.testing.assert_allclose(weight, reference[name], rtol=1e-5, atol=1e-6, err_msg=name)
        assert not np.allclose(weight, weights[int(name[-1])])


@pytest.mark.follows("test_basic")
@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_basic(kind):
    _compare(kind, 2, [([0, 1], 0.2)])


@pytest.mark.follows("test_two_groups")
@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_two_groups(kind):
    _compare(kind, 4, [([0, 1], 0.5), ([2, 3], 0.2)])


@pytest.mark.follows("test_pipelined")
@pytest.mark.parametrize("kind", OPTIMIZERS)
@pytest.mark.parametrize("pipelining", [True, False])
def test_pipelined(kind, pipelining):
    groups = [([0, 1, 2, 3], 15)]
    _compare(kind, 4, groups, stages=((0, 1), (2, 3)), factor=3, pipelining=pipelining)


@pytest.mark.follows("test_serialized_matmul")
@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_serialized_matmul(kind):
    def run(mode, factor):
        lhs_data = np.ones([6, 2], np.float32)
        builder = popart.Builder()
        lhs = builder.addInitializedInputTensor(lhs_data, "lhs")
        rhs = builder.addInitializedInputTensor(np.ones([2, 4], np.float32), "rhs")
        out = builder.aiOnnx.matmul([lhs, rhs])
        builder.setSerializeMatMul({out}, mode, factor)
        loss = builder.aiGraphcore.l1loss([out], 0.1)
        anchors = {
            out: popart.AnchorReturnType("All"),
            rhs: popart.AnchorReturnType("Final"),
            popart.reservedGradientPrefix() + lhs: popart.AnchorReturnType("All"),
        }
        options = popart.SessionOptions()
        options.enableGradientAccumulation = True
        patterns = popart.Patterns(
            ["MatMulOp", "MatMulRhsGradOp", "MatMulLhsGradOp", "OpToIdentity"]
        )
        patterns.enableRuntimeAsserts(False)
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, anchors),
            userOptions=options,
            loss=loss,
            optimizer=_popart_optimizer(kind, [popart.ClipNormSettings([lhs, rhs], 0.01)]),
            patterns=patterns,
            deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 1}),
        )
        session.prepareDevice()
        session.weightsFromHost()
        arrays = session.initAnchorArrays()
        session.run(popart.PyStepIO({}, arrays))
        return arrays

    plain, serialised = run("none", 0), run("output_channels", 2)
    assert len(plain) == 3
    for key, value in plain.items():
        np.testing.assert_allclose(serialised[key], value, rtol=1e-6, err_msg=key)
    # The clipped update moved rhs (norm 0.01 over both weights' gradients).
    assert not np.allclose(plain["rhs"], 1.0)


@pytest.mark.follows("test_clipping_all_weights")
@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_clipping_all_weights(kind):
    builder = popart.Builder()
    a = builder.addInitializedInputTensor(np.ones([6], np.float32), "a")
    b = builder.addInitializedInputTensor(np.ones([6], np.float32), "b")
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [6]))
    target = builder.addInputTensor(popart.TensorInfo("FLOAT", [6]))
    sub = builder.aiOnnx.sub([target, builder.aiOnnx.add([a, builder.aiOnnx.mul([b, x])])])
    loss = builder.aiGraphcore.identityloss(
        [builder.aiOnnx.mul([sub, sub])], reduction=popart.ReductionType.Mean
    )
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [loss]),
        loss=loss,
        optimizer=_popart_optimizer(kind, [popart.ClipNormSettings.clipAllWeights(0.1)]),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 1}),
    )
    ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    # Two ReduceSumSquare ops when all the weights are clipped (the original's count).
    assert [op["type"] for op in ir["maingraph"]].count("ReduceSumSquare") == 2
