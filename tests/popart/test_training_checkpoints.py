"""Checkpoints of training: a session resumed from a modelToHost file (weights and optimizer
state) with the saved random seed and RNG state continues exactly as the first session does,
dropout included; the file also runs in onnxruntime, reproducing the session's outputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from training_helpers import build_regression, read_weights, regression_data, train_session

import popart


def dropout_regression():
    """loss = sum(dropout(x @ w, 0.5)), trained by SGD with momentum (so the checkpoint
    needs the velocity as well as the weights)."""
    rng = np.random.default_rng(2)
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 6]), "x")
    w = builder.addInitializedInputTensor(rng.normal(size=(6, 6)).astype(np.float32), "w")
    (dropped,) = builder.aiOnnx.dropout([builder.aiOnnx.matmul([x, w])], 1, 0.5)
    loss = builder.aiGraphcore.identityloss([dropped], reduction=popart.ReductionType.Sum)
    return builder.getModelProto(), x, w, dropped, loss


def session_for(proto, dropped, loss):
    options = popart.SessionOptions()
    options.enableLoadAndOffloadRNGState = True
    session = popart.TrainingSession(
        proto,
        popart.DataFlow(2, {dropped: popart.AnchorReturnType("All")}),
        loss,
        popart.SGD({"defaultLearningRate": (0.01, True), "defaultMomentum": (0.9, True)}),
        popart.DeviceManager().createIpuModelDevice({}),
        userOptions=options,
    )
    session.prepareDevice()
    return session


def run(session, x, data):
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: data}, arrays))
    return next(iter(arrays.values()))


def weights_of(session, w):
    session.weightsToHost()
    out = {w: np.zeros([6, 6], np.float32)}
    session.readWeights(popart.PyWeightsIO(out))
    return out[w]


@pytest.mark.slow
def test_resumed_session_repeats_dropout_and_updates(tmp_path):
    proto, x, w, dropped, loss = dropout_regression()
    data = np.random.default_rng(0).normal(size=(3, 2, 4, 6)).astype(np.float32)
    first = session_for(proto, dropped, loss)
    first.weightsFromHost()
    run(first, x, data[0])
    # The checkpoint: weights and velocity in the model file, and the random state.
    path = str(tmp_path / "checkpoint.onnx")
    first.modelToHost(path)
    seed, rng_state = first.getRandomSeed(), first.getRNGState()
    assert len(rng_state) > 0 and all(0 <= value < 2**32 for value in rng_state)
    expected = [run(first, x, data[1]), run(first, x, data[2])]
    expected_weights = weights_of(first, w)

    resumed = session_for(path, dropped, loss)
    resumed.setRandomSeed(seed)  # before the RNG state: setting the seed derives a new state
    resumed.setRNGState(rng_state)
    assert resumed.getRNGState() == rng_state
    resumed.weightsFromHost()
    got = [run(resumed, x, data[1]), run(resumed, x, data[2])]
    for masked, reference in zip(got, expected, strict=True):
        np.testing.assert_array_equal(masked != 0, reference != 0)  # the same dropout masks
        np.testing.assert_allclose(masked, reference, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(weights_of(resumed, w), expected_weights, rtol=1e-6, atol=1e-6)

    # The update itself, in numpy from the file's weights and velocity and the masks seen:
    # d loss / d (x @ w) = mask / (1 - 0.5); v = 0.9 v + g; w -= 0.01 v (per batch).
    saved = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    weight = saved[w].astype(np.float64)
    velocity = saved[popart.reservedAcclPrefix() + w].astype(np.float64)
    for step, masked in enumerate(got):
        for batch in range(2):
            mask = (masked[batch] != 0) * 2.0
            velocity = 0.9 * velocity + data[1 + step, batch].T.astype(np.float64) @ mask
            weight = weight - 0.01 * velocity
    np.testing.assert_allclose(weights_of(resumed, w), weight, rtol=1e-4, atol=1e-5)

    # Without the saved seed, another session draws other masks.
    other = session_for(path, dropped, loss)
    other.weightsFromHost()
    assert not np.array_equal(run(other, x, data[1]) != 0, expected[0] != 0)


def test_model_file_runs_in_onnxruntime_like_an_inference_session(tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(4)
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 3]), "x")
    w = builder.addInitializedInputTensor(rng.normal(size=(3, 2)).astype(np.float32), "w")
    b = builder.addInitializedInputTensor(np.zeros(2, np.float32), "b")
    probabilities = builder.aiOnnx.softmax([builder.aiOnnx.add([builder.aiOnnx.matmul([x, w]), b])])
    label = builder.addInputTensor(popart.TensorInfo("INT32", [4]), "label")
    loss = builder.aiGraphcore.nllloss([probabilities, label])
    training = popart.TrainingSession(
        builder.getModelProto(), popart.DataFlow(1, {}), loss,
        popart.Adam({"defaultLearningRate": (0.05, False)}),
        popart.DeviceManager().createIpuModelDevice({}),
    )  # fmt: skip
    training.prepareDevice()
    training.weightsFromHost()
    data = rng.normal(size=(5, 4, 3)).astype(np.float32)
    labels = rng.integers(0, 2, size=(5, 4)).astype(np.int32)
    for batch in range(5):
        training.run(popart.PyStepIO({x: data[batch], label: labels[batch]}, {}))
    path = str(tmp_path / "trained.onnx")
    training.modelToHost(path)

    inference = popart.InferenceSession(
        path,
        popart.DataFlow(1, {probabilities: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    inference.prepareDevice()
    inference.weightsFromHost()
    arrays = inference.initAnchorArrays()
    test = rng.normal(size=(4, 3)).astype(np.float32)
    # The model's inputs include the label, which the probabilities do not read.
    inference.run(popart.PyStepIO({x: test, label: np.zeros(4, np.int32)}, arrays))
    # onnxruntime runs the forward part of the written model (the loss op is PopART's own).
    model = onnx.load(path)
    trained = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    initial = onnx.load_model_from_string(builder.getModelProto()).graph.initializer
    assert not np.allclose(trained[w], onnx.numpy_helper.to_array(initial[0]))  # it trained
    forward = onnx.utils.Extractor(model).extract_model([x], [probabilities])
    runtime = onnxruntime.InferenceSession(
        forward.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (expected,) = runtime.run([probabilities], {x: test})
    np.testing.assert_allclose(arrays[probabilities], expected, rtol=1e-5, atol=1e-6)


def test_optimizer_state_is_written_unless_its_streams_are_disabled(tmp_path):
    proto, x, w, dropped, loss = dropout_regression()
    data = np.ones((2, 4, 6), np.float32)
    initializers = {}
    for disabled in (False, True):
        options = popart.SessionOptions()
        options.disableOptimizerStateTensorStreams = disabled
        session = popart.TrainingSession(
            proto, popart.DataFlow(2, {}), loss,
            popart.SGD({"defaultLearningRate": (0.01, True), "defaultMomentum": (0.9, True)}),
            popart.DeviceManager().createIpuModelDevice({}), userOptions=options,
        )  # fmt: skip
        session.prepareDevice()
        session.weightsFromHost()
        session.run(popart.PyStepIO({x: data}, {}))
        path = str(tmp_path / f"disabled-{disabled}.onnx")
        session.modelToHost(path)
        initializers[disabled] = {t.name for t in onnx.load(path).graph.initializer}
        session.weightsToHost()
        velocity = {popart.reservedAcclPrefix() + w: np.zeros((6, 6), np.float32)}
        session.readWeights(popart.PyWeightsIO(velocity))
        # Disabled streams are not fetched by weightsToHost (ir.cpp storingIsDisabledForTensor):
        # the host keeps the state's initial zeros.
        moved = np.abs(velocity[popart.reservedAcclPrefix() + w]).sum() > 0
        assert moved != disabled
    assert initializers[False] == {w, popart.reservedAcclPrefix() + w}
    assert initializers[True] == {w}


def test_reset_host_weights_from_a_checkpoint_restores_the_optimizer_state(tmp_path):
    model = build_regression(onnx_loss=True)
    x, t = regression_data(6)
    optimizer = popart.SGD({"defaultLearningRate": (0.1, True), "defaultMomentum": (0.9, True)})
    _, expected, _ = train_session(model, optimizer, x[:4], t[:4], 2)
    first, _, _ = train_session(model, optimizer, x[:2], t[:2], 2)
    path = str(tmp_path / "checkpoint.onnx")
    first.modelToHost(path)
    # Another session, elsewhere in its own training, goes back to the checkpoint.
    # constantWeights (True by default) only freezes the weights of inference sessions.
    options = popart.SessionOptions()
    options.constantWeights = True
    other, _, _ = train_session(model, optimizer, x[4:], t[4:], 2, options=options)
    other.resetHostWeights(path)
    other.weightsFromHost()
    other.run(popart.PyStepIO({model.x: x[2:4], model.t: t[2:4]}, {}))
    weights = read_weights(other, model)
    for name in expected:
        np.testing.assert_allclose(weights[name], expected[name], rtol=1e-6, atol=1e-7)
