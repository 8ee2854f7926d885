"""graphcore/popart tests/integration/operators_test/batchnorm_test.py (part): BatchNormalization
in inference (2-D, 3-D and empty inputs, against numpy with the running statistics), in
training (batch statistics, the input's gradient against TensorFlow's autodiff of the same
formula), detached in inference mode inside a training session, refused in inference mode
in training undetached, its input shapes refused; non-spatial (opset 7) against a reshaped
spatial one; the running variance of ai.graphcore's (unbiased); repeated inference with the
same result, float16 with a float32 variance, and the shapes of its five training outputs
(Cpu)."""

import numpy as np
import pytest

import popart

EPSILON, MOMENTUM = 1e-05, 0.1


def _batchnorm(var_dtype=np.float16, data_dtype=np.float16, num_outputs=1):
    d1 = (np.random.rand(1, 3, 2, 2) * 100).astype(data_dtype)
    params = [np.random.rand(3).astype(data_dtype) for _ in range(3)]
    var = np.random.rand(3).astype(var_dtype)
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo(d1))
    inputs = [i1] + [builder.addInitializedInputTensor(p) for p in (*params, var)]
    outputs = builder.aiOnnx.batchnormalization(inputs, num_outputs, EPSILON, MOMENTUM)
    return builder, i1, d1, params, var, outputs


def _options():
    options = popart.SessionOptions()
    options.enableStochasticRounding = False
    return options


def _inference(builder, i1, d1, o_y, runs):
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o_y: popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        userOptions=_options(),
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    results = []
    for _ in range(runs):
        session.run(popart.PyStepIO({i1: d1}, anchors))
        results.append(np.copy(anchors[o_y]))
    return results


def _expected_inference(d1, params, var):
    scale, bias, mean = (p.astype(np.float64).reshape(1, 3, 1, 1) for p in params)
    var = var.astype(np.float64).reshape(1, 3, 1, 1)
    return (d1 - mean) / np.sqrt(var + EPSILON) * scale + bias


@pytest.mark.follows("test_batchnorm_repeated")
def test_batchnorm_repeated():
    builder, i1, d1, params, var, (o_y,) = _batchnorm()
    builder.addOutputTensor(o_y)
    results = _inference(builder, i1, d1, o_y, 11)
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])
    np.testing.assert_allclose(
        results[0], _expected_inference(d1, params, var), rtol=1e-2, atol=0.1
    )


def _train(builder, i1, d1, anchor_ids, loss_of):
    loss = builder.aiGraphcore.identityloss([loss_of])
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        loss=loss,
        dataFlow=popart.DataFlow(1, {a: popart.AnchorReturnType("All") for a in anchor_ids}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        optimizer=popart.ConstSGD(0.01),
        userOptions=_options(),
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    session.weightsFromHost()
    for _ in range(2):
        session.run(popart.PyStepIO({i1: d1}, anchors))
    return anchors


@pytest.mark.follows("test_batchnorm_train_half_fp32var")
def test_batchnorm_train_half_fp32var():
    builder, i1, d1, params, var, outputs = _batchnorm(var_dtype=np.float32, num_outputs=5)
    o_y = outputs[0]
    builder.addOutputTensor(o_y)
    anchors = _train(builder, i1, d1, [o_y], o_y)
    # Training normalises by the batch statistics: each channel's mean is its bias (moved
    # a little by the first step).
    mean_per_channel = anchors[o_y].astype(np.float64).mean(axis=(0, 2, 3))
    assert anchors[o_y].dtype == np.float16
    np.testing.assert_allclose(mean_per_channel, params[1], atol=0.02)


@pytest.mark.follows("test_batchnorm_inference_half_fp32var")
def test_batchnorm_inference_half_fp32var():
    builder, i1, d1, params, var, (o_y,) = _batchnorm(var_dtype=np.float32)
    builder.addOutputTensor(o_y)
    first, second = _inference(builder, i1, d1, o_y, 2)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, _expected_inference(d1, params, var), rtol=1e-2, atol=0.1)


@pytest.mark.follows("test_batchnorm_shapeinference")
def test_batchnorm_shapeinference():
    builder, i1, d1, _, _, outputs = _batchnorm(np.float32, np.float32, num_outputs=5)
    for o in outputs:
        builder.addOutputTensor(o)
    shapes = [tuple(builder.getTensorShape(o)) for o in outputs]
    assert shapes == [(1, 3, 2, 2), (3,), (3,), (3,), (3,)]
    anchors = _train(builder, i1, d1, list(outputs), outputs[0])
    for o, shape in zip(outputs, shapes, strict=True):
        assert anchors[o].shape == shape


def _normalized(x, scale, bias, mean, var):
    """(x - mean) / sqrt(var + eps) * scale + bias, the statistics per channel (axis 1)."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var, scale, bias = (np.reshape(v, shape) for v in (mean, var, scale, bias))
    return (x - mean) / np.sqrt(var + EPSILON) * scale + bias


def _bn_inputs(shape, running=None):
    d1 = np.random.rand(*shape).astype(np.float32)
    channels = shape[1]
    scale = np.random.rand(channels).astype(np.float32)
    b = np.random.rand(channels).astype(np.float32)
    if running is None:
        mean = np.random.rand(channels).astype(np.float32)
        var = np.ones(channels, np.float32) + (np.random.rand(channels).astype(np.float32) - 0.5)
    else:
        mean, var = running
    return d1, scale, b, mean, var


def _bn_infer(op_tester, d1, scale, b, mean, var):
    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in (d1, scale, b, mean, var)]
        (o_y,) = builder.aiOnnx.batchnormalization(ids, 1, EPSILON, MOMENTUM)
        builder.addOutputTensor(o_y)
        return [o_y]

    expected = _normalized(d1.astype(np.float64), scale, b, mean, var).astype(np.float32)
    op_tester.rtol = 1e-5
    op_tester.atol = 1e-6
    op_tester.run(init_builder, lambda _: [expected], "infer")


@pytest.mark.follows("test_batchnorm_test_0")
def test_batchnorm_test_0(op_tester):
    d1 = np.array(
        [[[[1, 1], [1, 1]], [[1, 1], [1, 1]]], [[[1, 0], [0, 1]], [[1, 0], [0, 1]]]],
        dtype=np.float32,
    )
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    _bn_infer(op_tester, d1, ones, zeros, zeros, ones)


@pytest.mark.follows("test_batchnorm_test_1")
def test_batchnorm_test_1(op_tester):
    _bn_infer(op_tester, *_bn_inputs((2, 2, 2, 2)))


@pytest.mark.follows("test_batchnorm_test_2")
def test_batchnorm_test_2(op_tester):
    _bn_infer(op_tester, *_bn_inputs((2, 2, 2, 2, 2)))


@pytest.mark.follows("test_batchnorm_test_3")
def test_batchnorm_test_3(op_tester):
    empty = np.zeros(0, np.float32)
    _bn_infer(op_tester, np.zeros((0, 0, 0, 0), np.float32), empty, empty, empty, empty)


def _training_reference(d1, scale, b, d__o):
    """Training-mode output (batch mean, biased batch variance) and the input's gradient,
    by TensorFlow's autodiff."""
    import tensorflow as tf

    x = tf.Variable(d1.astype(np.float64))
    axes = [0, *range(2, d1.ndim)]
    with tf.GradientTape() as tape:
        mean, var = tf.nn.moments(x, axes=axes, keepdims=True)
        shape = (1, -1) + (1,) * (d1.ndim - 2)
        y = (x - mean) / tf.sqrt(var + EPSILON) * scale.reshape(shape) + b.reshape(shape)
    grad = tape.gradient(y, x, output_gradients=tf.constant(d__o.astype(np.float64)))
    return y.numpy().astype(np.float32), grad.numpy().astype(np.float32)


@pytest.mark.follows("test_batchnorm_train_0")
def test_batchnorm_train_0(op_tester):
    d1 = np.array(
        [[[[1, 1], [1, 1]], [[1, 1], [1, 1]]], [[[1, 0], [0, 1]], [[1, 0], [0, 1]]]],
        dtype=np.float32,
    )
    scale, b = np.ones(2, np.float32), np.zeros(2, np.float32)
    mean, var = np.zeros(2, np.float32), np.ones(2, np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in (d1, scale, b, mean, var)]
        o_y, o_mean, o_var, _, _ = builder.aiOnnx.batchnormalization(ids, 5, EPSILON, MOMENTUM)
        for o in (o_y, o_mean, o_var):
            builder.addOutputTensor(o)
        return [o_y, g + ids[0], g + o_y]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        y, grad = _training_reference(d1, scale, b, d__o)
        return [y, grad, d__o]

    op_tester.setPatterns(["PreUniRepl", "ReciprocalGradOp"], enableRuntimeAsserts=False)
    op_tester.atol *= 10
    op_tester.run(init_builder, reference, "train")


def _one_output_training(op_tester, detach):
    d1, scale, b, mean, var = _bn_inputs((2, 2, 2, 2), running=(np.zeros(2), np.ones(2)))
    mean, var = mean.astype(np.float32), var.astype(np.float32)

    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in (d1, scale, b, mean, var)]
        (o_y,) = builder.aiOnnx.batchnormalization(ids, 1, EPSILON, MOMENTUM)
        if detach:
            o_y = builder.aiGraphcore.detach([o_y])
        builder.addOutputTensor(o_y)
        return [o_y]

    expected = _normalized(d1.astype(np.float64), scale, b, mean, var).astype(np.float32)
    op_tester.setPatterns(["PreUniRepl", "ReciprocalGradOp"], enableRuntimeAsserts=False)
    op_tester.rtol = 1e-04
    op_tester.run(init_builder, lambda _: [expected], "train")


@pytest.mark.follows("test_batchnorm_train_3")
def test_batchnorm_train_3(op_tester):
    with pytest.raises(popart.popart_exception) as e_info:
        _one_output_training(op_tester, detach=False)
    assert (
        "To use the BatchNorm Op in inference mode during training, it has to be detached first."
        in e_info.value.args[0]
    )


@pytest.mark.follows("test_batchnorm_train_4")
def test_batchnorm_train_4(op_tester):
    # Detached, a one-output BatchNormalization runs in inference mode (running statistics).
    _one_output_training(op_tester, detach=True)


def _batch_normalized(x, scale, b):
    axes = (0, *range(2, x.ndim))
    x = x.astype(np.float64)
    return _normalized(x, scale, b, x.mean(axis=axes), x.var(axis=axes))


@pytest.mark.follows("test_batchnorm_train_2")
def test_batchnorm_train_2(op_tester):
    # Sixteen chained five-output BatchNormalizations normalise by their batch statistics,
    # in an InferenceSession too: the statistics outputs make them train.
    d1, scale, b, mean, var = _bn_inputs((2, 2, 2, 2, 2), running=(np.zeros(2), np.ones(2)))
    mean, var = mean.astype(np.float32), var.astype(np.float32)

    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in (d1, scale, b, mean, var)]
        o_y, o_mean, o_var, _, _ = builder.aiOnnx.batchnormalization(ids, 5, EPSILON, MOMENTUM)
        for _ in range(15):
            o_y, o_mean, o_var, _, _ = builder.aiOnnx.batchnormalization(
                [o_y, ids[1], ids[2], o_mean, o_var], 5, EPSILON, MOMENTUM
            )
        for o in (o_y, o_mean, o_var):
            builder.addOutputTensor(o)
        return [o_y, o_mean, o_var]

    expected = d1
    for _ in range(16):
        expected = _batch_normalized(expected, scale, b)
    op_tester.setPatterns(["PreUniRepl", "ReciprocalGradOp"], enableRuntimeAsserts=False)
    op_tester.rtol, op_tester.atol = 1e-04, 1e-5
    op_tester.run(init_builder, lambda _: [expected.astype(np.float32), None, None], "infer")


@pytest.mark.follows("test_batchnorm_train_fp32var_torch_version")
def test_batchnorm_train_fp32var_torch_version(op_tester):
    # ai.graphcore's BatchNormalization updates the running variance with the unbiased
    # (N - 1) batch variance, as torch does: with momentum 0 it is that variance.
    d1 = np.random.rand(1, 3, 2).astype(np.float32) * 100
    scale, b = np.random.rand(3).astype(np.float32), np.random.rand(3).astype(np.float32)
    mean, var = np.zeros(3, np.float32), np.ones(3, np.float32)

    def init_builder(builder):
        ids = [builder.addInputTensor(d1)]
        ids += [builder.addInitializedInputTensor(a) for a in (scale, b, mean, var)]
        o_y, _, running_var, _, _ = builder.aiGraphcore.batchnormalization(ids, 5, EPSILON, 0)
        builder.addOutputTensor(running_var)
        builder.addOutputTensor(o_y)
        return [o_y, running_var]

    expected_var = d1.astype(np.float64).var(axis=(0, 2), ddof=1).astype(np.float32)
    expected_y = _batch_normalized(d1, scale, b).astype(np.float32)
    op_tester.atol = 1e-05
    op_tester.rtol = 1e-5
    op_tester.run(init_builder, lambda _: [expected_y, expected_var], "infer")


@pytest.mark.follows("test_batchnorm_test_detached_mean_var")
def test_batchnorm_test_detached_mean_var(op_tester):
    d1 = np.array(
        [[[[1, 1], [1, 1]], [[1, 1], [1, 1]]], [[[1, 0], [0, 1]], [[1, 0], [0, 1]]]],
        dtype=np.float32,
    )
    scale, b = np.ones(2, np.float32), np.zeros(2, np.float32)
    mean, var = np.zeros(2, np.float32), np.ones(2, np.float32)

    def init_builder(builder):
        i1, i_scale, i_b, i_mean, i_var = (
            builder.addInputTensor(a) for a in (d1, scale, b, mean, var)
        )
        statistics = [builder.aiGraphcore.detach([t]) for t in (i_mean, i_var)]
        (o_y,) = builder.aiOnnx.batchnormalization(
            [i1, i_scale, i_b, *statistics], 1, EPSILON, MOMENTUM
        )
        builder.addOutputTensor(o_y)
        return [o_y]

    expected = _normalized(d1.astype(np.float64), scale, b, mean, var).astype(np.float32)
    op_tester.setPatterns(["PreUniRepl", "ReciprocalGradOp"], enableRuntimeAsserts=False)
    op_tester.atol = 1e-6
    op_tester.run(init_builder, lambda _: [expected], "infer")


@pytest.mark.follows("test_batchnorm_train_1")
def test_batchnorm_train_1(op_tester, tmp_path):
    # Trained with running statistics that are weights: modelToHost writes them updated, in
    # float_data as the original's writer does.
    d1, scale, b, _, _ = _bn_inputs((2, 2, 2, 2))
    mean, var = np.array([5, 5], np.float32), np.array([7, 7], np.float32)
    initializers = {}
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in (d1, scale, b)]
        for value in (mean, var):
            ids.append(builder.addInitializedInputTensor(value))
            initializers[ids[-1]] = value
        o_y, o_mean, o_var, _, _ = builder.aiOnnx.batchnormalization(ids, 5, EPSILON, MOMENTUM)
        for o in (o_y, o_mean, o_var):
            builder.addOutputTensor(o)
        return [o_y, g + ids[0], g + o_y]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        y, grad = _training_reference(d1, scale, b, d__o)
        return [y, grad, d__o]

    op_tester.setPatterns(["PreUniRepl", "ReciprocalGradOp"], enableRuntimeAsserts=False)
    op_tester.rtol = 1e-04
    # The input's gradient is zero up to float32 rounding (the loss is a mean of y).
    op_tester.atol = 1e-7
    session = op_tester.run(init_builder, reference, "train")
    path = str(tmp_path / "test_batchnorm_train_1.onnx")
    session.modelToHost(path)
    import onnx

    for init in onnx.load(path).graph.initializer:
        assert not np.allclose(initializers[init.name], np.array(init.float_data, np.float32))


@pytest.mark.follows("test_batchnorm_train_0_errorcases")
def test_batchnorm_train_0_errorcases(op_tester):
    d1 = np.zeros((2, 2, 2, 2), np.float32)
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    op_tester.setPatterns(["PreUniRepl", "ReciprocalGradOp"], enableRuntimeAsserts=False)

    def refused(inputs, opsets=None, **attributes):
        def init_builder(builder):
            ids = [builder.addInputTensor(a) for a in inputs]
            (o_y,) = builder.aiOnnx.batchnormalization(ids, 1, EPSILON, MOMENTUM, **attributes)
            return [o_y]

        with pytest.raises(popart.popart_exception) as e_info:
            op_tester.run(init_builder, None, "train", opsets=opsets)
        return e_info.value.args[0]

    # An input of fewer than 4 dimensions.
    assert "batch norm requires" in refused([np.ones((2, 2), np.float32), ones, zeros, zeros, ones])
    # Each of scale, B, mean and var must have X's channel count.
    for index, name in enumerate(["scale", "B", "mean", "var"]):
        inputs = [d1, ones, zeros, zeros, ones]
        inputs[1 + index] = one if name in ("scale", "var") else zero
        message = refused(inputs)
        assert all(m in message for m in ["expected shape", name, "to be [2]"])
    # Non-spatial (opset 7): the statistics have X's shape but the first dimension.
    three = np.zeros((2, 2, 2), np.float32)
    message = refused(
        [d1, three, three, three, np.ones((2, 2, 4), np.float32)],
        opsets={"ai.onnx": 7, "ai.onnx.ml": 1, "ai.graphcore": 1},
        spatial=0,
    )
    assert all(m in message for m in ["expected shape", "var", "to be [2 2 2]"])


OPSET_7 = {"ai.onnx": 7, "ai.onnx.ml": 1, "ai.graphcore": 1}


def _nonspatial_inputs():
    d1 = np.random.rand(2, 2, 2).astype(np.float32)
    scale, b, mean = (np.random.rand(2, 2).astype(np.float32) for _ in range(3))
    var = np.ones((2, 2), np.float32) + (np.random.rand(2, 2).astype(np.float32) - 0.5)
    return d1, scale, b, mean, var


def _as_spatial(d1, *params):
    """spatial=0 on [N, C, D] is spatial=1 on [N, C*D, 1] with the parameters flattened."""
    return (d1.reshape(2, 4, 1), *(p.reshape(4) for p in params))


def _nonspatial(op_tester, train, also_spatial=False):
    d1, scale, b, mean, var = _nonspatial_inputs()
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in (d1, scale, b, mean, var)]
        count = 5 if train or also_spatial else 1
        outputs = builder.aiOnnx.batchnormalization(ids, count, EPSILON, MOMENTUM, spatial=0)
        o_y = outputs[0]
        for o in outputs[:3]:
            builder.addOutputTensor(o)
        if also_spatial:
            flat = [builder.reshape_const(builder.aiOnnx, [ids[0]], [2, 4, 1])]
            flat += [builder.reshape_const(builder.aiOnnx, [i], [4]) for i in ids[1:]]
            o_y2 = builder.aiOnnx.batchnormalization(flat, count, EPSILON, MOMENTUM, spatial=1)[0]
            o_y2 = builder.reshape_const(builder.aiOnnx, [o_y2], [2, 2, 2])
            return [o_y, o_y2]
        return [o_y, g + ids[0], g + o_y] if train else [o_y]

    def reference(ref_data):
        x, *params = _as_spatial(d1, scale, b, mean, var)
        if not train and not also_spatial:
            return [_normalized(x.astype(np.float64), *params).reshape(d1.shape).astype(np.float32)]
        d__o = ref_data.getOutputTensorGrad(0) if train and not also_spatial else np.ones_like(d1)
        y, grad = _training_reference(x, params[0], params[1], d__o.reshape(2, 4, 1))
        if also_spatial:
            return [y.reshape(d1.shape), y.reshape(d1.shape)]
        return [y.reshape(d1.shape), grad.reshape(d1.shape), d__o]

    # The input's gradient is zero up to float32 rounding (the loss is a mean of y).
    op_tester.atol, op_tester.rtol = 1e-05, 1e-03
    op_tester.run(init_builder, reference, "train" if train else "infer", opsets=OPSET_7)


@pytest.mark.follows("test_batchnorm_train_nonspatial")
def test_batchnorm_train_nonspatial(op_tester):
    _nonspatial(op_tester, train=True)


@pytest.mark.follows("test_batchnorm_train_nonspatial_2")
def test_batchnorm_train_nonspatial_2(op_tester):
    # Non-spatial against a reshaped spatial normalization in the same model.
    _nonspatial(op_tester, train=True, also_spatial=True)


@pytest.mark.follows("test_batchnorm_test_nonspatial")
def test_batchnorm_test_nonspatial(op_tester):
    _nonspatial(op_tester, train=False)


@pytest.mark.follows("test_batchnorm_test_nonspatial_2")
def test_batchnorm_test_nonspatial_2(op_tester):
    _nonspatial(op_tester, train=False, also_spatial=True)
