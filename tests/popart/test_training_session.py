"""TrainingSession: its documented preconditions and errors, gradient and state anchors,
hyper-parameter updates, weights and files, random state and streams, against numpy and
onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from training_helpers import (
    build_regression,
    read_weights,
    regression_data,
    regression_gradients,
    train_session,
)

import popart


def sgd(lr=0.1, const=False):
    return popart.SGD({"defaultLearningRate": (lr, const)})


def make_session(model, anchors=None, optimizer=None, options=None, batches_per_step=2):
    return popart.TrainingSession(
        model.proto,
        popart.DataFlow(batches_per_step, anchors or {}),
        model.loss,
        optimizer or sgd(),
        popart.DeviceManager().createIpuModelDevice({}),
        userOptions=options,
    )


def numpy_sgd(model, x, t, learning_rates):
    params = {
        k: v.astype(np.float64) for k, v in (("w", model.initial["w"]), ("b", model.initial["b"]))
    }
    for step, lr in enumerate(learning_rates):
        gradients = regression_gradients(params, x[step], t[step])
        params = {k: params[k] - lr * gradients[k] for k in params}
    return params


# -- preconditions and errors ------------------------------------------------------------------


def test_run_needs_weights_from_host_first():
    model = build_regression()
    session = make_session(model)
    session.prepareDevice()
    x, t = regression_data(2)
    with pytest.raises(popart.popart_exception, match="Must call weightsFromHost before run"):
        session.run(popart.PyStepIO({model.x: x, model.t: t}, {}))


def test_loss_must_be_a_scalar_tensor_of_the_model():
    model = build_regression()
    with pytest.raises(popart.popart_exception, match="Could not find loss tensor 'nope'"):
        popart.TrainingSession(
            model.proto, popart.DataFlow(1, {}), "nope", sgd(),
            popart.DeviceManager().createIpuModelDevice({}),
        )  # fmt: skip
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]))
    w = builder.addInitializedInputTensor(np.ones([3], np.float32))
    vector_loss = builder.aiGraphcore.l1loss(
        [builder.aiOnnx.mul([x, w])], 1.0, reduction=popart.ReductionType.NoReduction
    )
    with pytest.raises(
        popart.popart_exception, match=f"Loss tensor, '{vector_loss}', must be a scalar"
    ):
        popart.TrainingSession(
            builder.getModelProto(), popart.DataFlow(1, {}), vector_loss, sgd(),
            popart.DeviceManager().createIpuModelDevice({}),
        )  # fmt: skip


def test_wrongly_typed_arguments_name_the_argument():
    model = build_regression()
    device = popart.DeviceManager().createIpuModelDevice({})
    with pytest.raises(TypeError, match="optimizer"):
        popart.TrainingSession(model.proto, popart.DataFlow(1, {}), model.loss, "sgd", device)
    with pytest.raises(TypeError, match="loss"):
        popart.TrainingSession(model.proto, popart.DataFlow(1, {}), 3, sgd(), device)
    with pytest.raises(TypeError, match="defaultLearningRate"):
        popart.SGD({"defaultLearningRate": 0.1})
    with pytest.raises(TypeError, match="defaultBeta1"):
        popart.Adam({"defaultBeta1": ("0.9", True)})
    with pytest.raises(popart.popart_exception, match="Invalid Adaptive key, defaultBeta1"):
        popart.Adaptive({"defaultBeta1": (0.9, True)})
    with pytest.raises(popart.popart_exception, match="Negative learning rate"):
        popart.SGD({"defaultLearningRate": (-0.1, True)})
    with pytest.raises(popart.popart_exception, match="Constant, zero learning rate"):
        popart.SGD({"defaultLearningRate": (0.0, True)})
    with pytest.raises(popart.popart_exception, match="Non-positive velocity scaling"):
        popart.SGD({"defaultVelocityScaling": (0.0, True)})
    with pytest.raises(popart.popart_exception, match="Non-positive eps"):
        popart.Adam({"defaultEps": (0.0, True)})
    with pytest.raises(popart.popart_exception, match="rmspropTFVariant"):
        popart.Adaptive({}, mode=popart.AdaptiveMode.AdaGrad, rmsprop_tf_variant=True)


def test_accumulation_factor_needs_gradient_accumulation():
    model = build_regression()
    options = popart.SessionOptions()
    options.accumulationFactor = 4
    with pytest.raises(
        popart.popart_exception,
        match="accumulationFactor is 4, but enableGradientAccumulation is False",
    ):
        make_session(model, options=options)


def test_anchors_on_missing_gradients_and_state_are_errors():
    model = build_regression()
    with pytest.raises(
        popart.popart_exception, match="gradient of 'missing', which is not a tensor"
    ):
        make_session(
            model, {popart.reservedGradientPrefix() + "missing": popart.AnchorReturnType("All")}
        )
    with pytest.raises(popart.popart_exception, match="'Accl___w' is not a tensor of this session"):
        # Plain SGD without momentum keeps no velocity.
        make_session(model, {popart.reservedAcclPrefix() + "w": popart.AnchorReturnType("All")})
    with pytest.raises(popart.popart_exception, match="'t' has no gradient"):
        builder = popart.Builder()
        x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
        t = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), "t")
        w = builder.addInitializedInputTensor(np.ones([2], np.float32), "w")
        loss = builder.aiGraphcore.l1loss([builder.aiOnnx.mul([x, w])], 1.0)
        builder.addOutputTensor(builder.aiOnnx.add([t, x]))
        popart.TrainingSession(
            builder.getModelProto(),
            popart.DataFlow(1, {popart.reservedGradientPrefix() + t: popart.AnchorReturnType("All")}),
            loss, sgd(), popart.DeviceManager().createIpuModelDevice({}),
        )  # fmt: skip


# -- gradients and anchors -----------------------------------------------------------------------


def test_gradient_anchors_of_weights_inputs_and_activations():
    model = build_regression()
    graph = onnx.load_model_from_string(model.proto).graph
    y = graph.node[1].output[0]  # x @ w + b
    grad = popart.reservedGradientPrefix()
    anchors = {
        name: popart.AnchorReturnType("All")
        for name in (grad + model.w, grad + model.x, grad + y, model.loss)
    }
    loss_scaling = 8.0
    optimizer = popart.SGD(
        {"defaultLearningRate": (0.1, True), "lossScaling": (loss_scaling, True)}
    )
    x, t = regression_data(2)
    session = make_session(model, anchors, optimizer)
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    assert arrays[grad + model.w].shape == (2, 3, 2)
    session.run(popart.PyStepIO({model.x: x, model.t: t}, arrays))
    params = {
        k: v.astype(np.float64) for k, v in (("w", model.initial["w"]), ("b", model.initial["b"]))
    }
    for step in range(2):
        prediction = x[step] @ params["w"] + params["b"]
        d_y = 2 * (prediction - t[step]) / prediction.size
        gradients = regression_gradients(params, x[step], t[step])
        np.testing.assert_allclose(
            arrays[model.loss][step], np.mean((prediction - t[step]) ** 2), rtol=1e-5
        )
        # Gradients are those of the loss times the loss scaling, as the backward pass has them.
        np.testing.assert_allclose(arrays[grad + y][step], loss_scaling * d_y, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            arrays[grad + model.x][step], loss_scaling * d_y @ params["w"].T, rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(
            arrays[grad + model.w][step], loss_scaling * gradients["w"], rtol=1e-5, atol=1e-6
        )
        params = {k: params[k] - 0.1 * gradients[k] for k in params}


def test_updated_weight_anchor_and_return_types():
    model = build_regression()
    anchors = {
        popart.reservedUpdatedVarPrefix() + model.w: popart.AnchorReturnType("EveryN", 2),
        model.w: popart.AnchorReturnType("All"),
        model.loss: popart.AnchorReturnType("Sum"),
    }
    x, t = regression_data(4)
    session = make_session(model, anchors, sgd(0.05), batches_per_step=4)
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO({model.x: x, model.t: t}, arrays))
    trajectory = [numpy_sgd(model, x, t, [0.05] * steps)["w"] for steps in range(5)]
    # An anchored weight is copied after the step's update, as the original's tests expect
    # (operators_test/detach_test.py, decompose_gradient_summation_test.py).
    np.testing.assert_allclose(arrays[model.w], trajectory[1:5], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        arrays[popart.reservedUpdatedVarPrefix() + model.w],
        [trajectory[2], trajectory[4]],
        rtol=1e-5,
        atol=1e-6,
    )
    losses = [
        np.mean((x[i] @ trajectory[i] + numpy_sgd(model, x, t, [0.05] * i)["b"] - t[i]) ** 2)
        for i in range(4)
    ]
    np.testing.assert_allclose(arrays[model.loss], sum(losses), rtol=1e-5)


# -- updateOptimizerFromHost ------------------------------------------------------------------------


def test_update_optimizer_from_host_changes_non_const_values():
    model = build_regression()
    x, t = regression_data(4)
    session = make_session(model, optimizer=sgd(0.1))
    session.prepareDevice()
    session.weightsFromHost()
    session.run(popart.PyStepIO({model.x: x[:2], model.t: t[:2]}, {}))
    session.updateOptimizerFromHost(sgd(0.02))
    session.run(popart.PyStepIO({model.x: x[2:], model.t: t[2:]}, {}))
    expected = numpy_sgd(model, x, t, [0.1, 0.1, 0.02, 0.02])
    weights = read_weights(session, model)
    for name in expected:
        np.testing.assert_allclose(weights[name], expected[name], rtol=1e-5, atol=1e-6)


def test_update_optimizer_from_host_refuses_incompatible_optimizers():
    model = build_regression()
    session = make_session(
        model,
        optimizer=popart.SGD({"defaultLearningRate": (0.1, False), "defaultMomentum": (0.9, True)}),
    )
    with pytest.raises(popart.popart_exception, match="momentum of weight 'w' is const"):
        session.updateOptimizerFromHost(
            popart.SGD({"defaultLearningRate": (0.1, False), "defaultMomentum": (0.5, True)})
        )
    with pytest.raises(popart.popart_exception, match="between const and non-const"):
        session.updateOptimizerFromHost(
            popart.SGD({"defaultLearningRate": (0.1, True), "defaultMomentum": (0.9, True)})
        )
    with pytest.raises(popart.popart_exception, match="created with a SGD optimizer"):
        session.updateOptimizerFromHost(popart.Adam({}))
    adam = make_session(model, optimizer=popart.Adam({"defaultLearningRate": (0.1, False)}))
    with pytest.raises(popart.popart_exception, match="mode=Lamb"):
        adam.updateOptimizerFromHost(
            popart.Adam({"defaultLearningRate": (0.1, False)}, mode=popart.AdamMode.Lamb)
        )
    with pytest.raises(popart.popart_exception, match="clip norm"):
        adam.updateOptimizerFromHost(
            popart.Adam(
                {"defaultLearningRate": (0.1, False)},
                clip_norm_settings=[popart.ClipNormSettings.clipAllWeights(1.0)],
            )
        )


# -- weights and files --------------------------------------------------------------------------------


def test_write_weights_then_train_from_them():
    model = build_regression()
    x, t = regression_data(2)
    session = make_session(model)
    session.prepareDevice()
    session.weightsFromHost()
    start = {model.w: np.full((3, 2), 0.5, np.float32), model.b: np.zeros(2, np.float32)}
    session.writeWeights(popart.PyWeightsIO(start))
    session.weightsFromHost()
    session.run(popart.PyStepIO({model.x: x, model.t: t}, {}))
    params = {"w": start[model.w].astype(np.float64), "b": start[model.b].astype(np.float64)}
    for step in range(2):
        gradients = regression_gradients(params, x[step], t[step])
        params = {k: params[k] - 0.1 * gradients[k] for k in params}
    weights = read_weights(session, model)
    np.testing.assert_allclose(weights["w"], params["w"], rtol=1e-5, atol=1e-6)


def test_model_to_host_holds_trained_weights_and_optimizer_state(tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    model = build_regression(onnx_loss=True)
    x, t = regression_data(8)
    optimizer = popart.Adam({"defaultLearningRate": (0.01, False)})
    # Reference: one session trained on all 8 batches.
    _, expected, _ = train_session(model, optimizer, x, t, 2)
    # Checkpointed after 4 batches, resumed from the file by a new session.
    first, _, _ = train_session(model, optimizer, x[:4], t[:4], 2)
    path = tmp_path / "checkpoint.onnx"
    first.modelToHost(str(path))
    saved = onnx.load_model(str(path))
    names = {tensor.name for tensor in saved.graph.initializer}
    assert {popart.reservedAccl1Prefix() + "w", popart.reservedStepPrefix() + "b"} <= names
    resumed = build_regression(onnx_loss=True)
    resumed.proto = saved.SerializeToString()
    _, weights, _ = train_session(resumed, optimizer, x[4:], t[4:], 2)
    for name in expected:
        np.testing.assert_allclose(weights[name], expected[name], rtol=1e-5, atol=1e-6)
    # onnxruntime runs the saved model with the trained weights.
    runtime = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    trained = read_weights(first, model)
    (loss,) = runtime.run([model.loss], {model.x: x[0], model.t: t[0]})
    np.testing.assert_allclose(
        loss, np.mean((x[0] @ trained["w"] + trained["b"] - t[0]) ** 2), rtol=1e-5
    )


def test_reset_host_weights_and_weights_of_another_model(tmp_path):
    model = build_regression()
    x, t = regression_data(2)
    session = make_session(model)
    session.prepareDevice()
    session.weightsFromHost()
    session.run(popart.PyStepIO({model.x: x, model.t: t}, {}))
    session.resetHostWeights(model.proto)
    session.weightsFromHost()
    weights = read_weights(session, model)
    np.testing.assert_array_equal(weights["w"], model.initial["w"])
    other = popart.Builder()
    a = other.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    other.addOutputTensor(other.aiOnnx.relu([a]))
    # A model without initializers resets nothing (the original reads only initializers).
    session.resetHostWeights(other.getModelProto())
    session.writeWeights(popart.PyWeightsIO({"nope": np.zeros(2, np.float32)}))  # ignored
    np.testing.assert_array_equal(read_weights(session, model)["w"], model.initial["w"])


def test_compile_and_export_then_load_executable(tmp_path):
    model = build_regression()
    x, t = regression_data(4)
    optimizer = popart.SGD({"defaultLearningRate": (0.1, True), "defaultMomentum": (0.9, True)})
    session, _, _ = train_session(model, optimizer, x[:2], t[:2], 2)
    path = str(tmp_path / "training.popef")
    session.compileAndExport(path)
    session.run(popart.PyStepIO({model.x: x[2:], model.t: t[2:]}, {}))
    expected = read_weights(session, model)
    loaded = make_session(model, optimizer=optimizer)
    loaded.loadExecutable(path)
    loaded.prepareDevice()
    loaded.weightsFromHost()
    loaded.run(popart.PyStepIO({model.x: x[2:], model.t: t[2:]}, {}))
    weights = read_weights(loaded, model)
    for name in expected:
        np.testing.assert_allclose(weights[name], expected[name], rtol=1e-6, atol=1e-7)
    other = make_session(model, optimizer=popart.Adam({}))
    with pytest.raises(
        popart.popart_exception, match="compiled for another model or other settings"
    ):
        other.loadExecutable(path)


# -- random state, batch normalization, streams ---------------------------------------------------


def dropout_model():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]), "x")
    w = builder.addInitializedInputTensor(np.ones([8, 8], np.float32), "w")
    (dropped,) = builder.aiOnnx.dropout([builder.aiOnnx.matmul([x, w])], 1, 0.5)
    loss = builder.aiGraphcore.identityloss([dropped], reduction=popart.ReductionType.Sum)
    return builder.getModelProto(), x, dropped, loss


def test_set_random_seed_makes_dropout_repeat():
    proto, x, dropped, loss = dropout_model()
    data = np.ones([2, 4, 8], np.float32)

    def run(seed=None, session=None):
        if session is None:
            session = popart.TrainingSession(
                proto, popart.DataFlow(2, {dropped: popart.AnchorReturnType("All")}), loss,
                sgd(0.01), popart.DeviceManager().createIpuModelDevice({}),
            )  # fmt: skip
            session.prepareDevice()
        if seed is not None:
            session.setRandomSeed(seed)
        session.weightsFromHost()
        arrays = session.initAnchorArrays()
        session.run(popart.PyStepIO({x: data}, arrays))
        return session, arrays[dropped]

    _, first = run(11)
    session, second = run(11)
    np.testing.assert_array_equal(first, second)
    kept = first != 0
    assert 0.25 < kept.mean() < 0.75  # about half dropped
    # The first batch (before any update): kept values are 8 / (1 - 0.5).
    np.testing.assert_allclose(first[0][kept[0]], 16.0)
    assert not np.array_equal(first[0] != 0, first[1] != 0)  # each batch draws its own mask
    seed = session.getRandomSeed()
    _, third = run(session=session)
    _, replayed = run(seed)
    np.testing.assert_array_equal(third, replayed)


def test_batch_normalization_updates_running_statistics():
    rng = np.random.default_rng(3)
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 2, 3]), "x")
    scale = builder.addInitializedInputTensor(np.ones(2, np.float32), "scale")
    bias = builder.addInitializedInputTensor(np.zeros(2, np.float32), "bias")
    mean = builder.addInitializedInputTensor(np.zeros(2, np.float32), "mean")
    variance = builder.addInitializedInputTensor(np.ones(2, np.float32), "var")
    outputs = builder.aiOnnx.batchnormalization([x, scale, bias, mean, variance], 5, 1e-5, 0.9)
    loss = builder.aiGraphcore.l1loss([outputs[0]], 1.0)
    session = popart.TrainingSession(
        builder.getModelProto(), popart.DataFlow(2, {}), loss, sgd(0.01),
        popart.DeviceManager().createIpuModelDevice({}),
    )  # fmt: skip
    session.prepareDevice()
    session.weightsFromHost()
    data = rng.normal(size=(2, 4, 2, 3)).astype(np.float32)
    session.run(popart.PyStepIO({x: data}, {}))
    running_mean, running_var = np.zeros(2), np.ones(2)
    for batch in data:
        running_mean = 0.9 * running_mean + 0.1 * batch.mean(axis=(0, 2))
        running_var = 0.9 * running_var + 0.1 * batch.var(axis=(0, 2))
    session.weightsToHost()
    statistics = {mean: np.zeros(2, np.float32), variance: np.zeros(2, np.float32)}
    session.readWeights(popart.PyWeightsIO(statistics))
    np.testing.assert_allclose(statistics[mean], running_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(statistics[variance], running_var, rtol=1e-4, atol=1e-5)


def test_connect_stream_to_callback_feeds_inputs_and_reads_anchors():
    model = build_regression()
    x, t = regression_data(2)
    session = make_session(model, {model.loss: popart.AnchorReturnType("All")}, sgd(0.05))
    fed = iter(x)
    seen = []
    session.connectStreamToCallback(model.x, lambda buffer: buffer.__setitem__(..., next(fed)))
    session.connectStreamToCallback(model.loss, lambda buffer: seen.append(float(buffer)))
    with pytest.raises(popart.popart_exception, match="no stream 'nope'"):
        session.connectStreamToCallback("nope", print)
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    # x comes from its callback, not from the step IO.
    session.run(popart.PyStepIO({model.t: t}, arrays))
    w = numpy_sgd(model, x, t, [0.05])
    expected = [
        np.mean((x[0] @ model.initial["w"] + model.initial["b"] - t[0]) ** 2),
        np.mean((x[1] @ w["w"] + w["b"] - t[1]) ** 2),
    ]
    np.testing.assert_allclose(arrays[model.loss], expected, rtol=1e-5)
    np.testing.assert_allclose(seen, expected, rtol=1e-5)
