"""graphcore/popart tests/integration/gradient_accumulation_test.py (part): training a chain
of MatMuls with SGD or Adam (weight decay) and gradient accumulation over micro-batches gives the
weights of training on the whole batch at once, on one or two IPUs, over one or several
batches per step; accumulation is refused in inference and a factor above 1 without it.
The original runs them on an IPU Model; here on emulated IPUs. Its second model (Sin, Exp,
Conv, Softmax) is not ported yet. The optimizer state (Accl___, Accl1___, Accl2___,
Step___) is written to the model by modelToHost and read back by a new session."""

import numpy as np
import onnx
import pytest

import popart

BATCH, HIDDEN = 12, 16
# The original chains six MatMuls; three keep a chain split over two IPUs at about half the
# compile time (each weight adds its own optimizer update to the compiled step).
LAYERS = 3
LR, WD, XI = 0.12, 0.08, 0.1
EXPLICIT = pytest.mark.parametrize("explicit_loops", [True, False])


def _sgd():
    return popart.SGD({"defaultLearningRate": (LR, False), "defaultWeightDecay": (WD, False)})


def _adam():
    return popart.Adam(
        {
            "defaultLearningRate": (LR, False),
            "defaultBeta1": (0.9, False),
            "defaultBeta2": (0.999, False),
            "defaultWeightDecay": (WD, False),
            "defaultEps": (1e-6, True),
        }
    )


def _model(accum_factor, multi_ipu):
    rng = np.random.RandomState(1234)
    micro = BATCH // accum_factor
    builder = popart.Builder()
    x = ip = builder.addInputTensor(popart.TensorInfo("FLOAT", [micro, HIDDEN]))
    weights = []
    for i in range(LAYERS):
        w = builder.addInitializedInputTensor(
            (1.0 - XI * rng.rand(HIDDEN, HIDDEN)).astype(np.float32), "weight"
        )
        weights.append(w)
        x = builder.aiOnnx.matmul([x, w])
        if multi_ipu:
            builder.virtualGraph(x, 1 if i >= LAYERS - 2 else 0)
    label = builder.addInputTensor("INT32", [micro])
    loss = builder.aiGraphcore.nllloss([x, label], reduction=popart.ReductionType.Sum)
    if multi_ipu:
        builder.virtualGraph(loss, 1)
    return builder.getModelProto(), ip, label, loss, weights


def _train(accum_factor, enable_accum, batches_per_step, steps, multi_ipu, explicit_loops,
           inference=False, optimizer=_sgd):  # fmt: skip
    """The final weights after `steps` runs on the same data, split into micro-batches."""
    proto, ip, label, loss, weights = _model(accum_factor, multi_ipu)
    options = popart.SessionOptions()
    options.enableGradientAccumulation = enable_accum
    options.accumulationFactor = accum_factor
    options.enableOutlining = False
    if explicit_loops:
        options.enableExplicitMainLoops = True
        options.aliasZeroCopy = True
        options.explicitRecomputation = True
        options.useHostCopyOps = True
    options.virtualGraphMode = (
        popart.VirtualGraphMode.Manual if multi_ipu else popart.VirtualGraphMode.Off
    )
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 2 if multi_ipu else 1})
    data_flow = popart.DataFlow(batches_per_step, {loss: popart.AnchorReturnType("All")})
    if inference:
        popart.InferenceSession(
            fnModel=proto, dataFlow=data_flow, deviceInfo=device, userOptions=options
        )
        return None
    session = popart.TrainingSession(
        fnModel=proto, dataFlow=data_flow, deviceInfo=device, loss=loss,
        optimizer=optimizer(), userOptions=options,
    )  # fmt: skip
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    rng = np.random.RandomState(0)
    inputs = rng.rand(batches_per_step, BATCH, HIDDEN).astype(np.float32)
    labels = rng.randint(0, HIDDEN, (batches_per_step, BATCH)).astype(np.int32)
    shape = [batches_per_step] + ([accum_factor] if accum_factor > 1 else [])
    feed = {
        ip: inputs.reshape(*shape, BATCH // accum_factor, HIDDEN),
        label: labels.reshape(*shape, BATCH // accum_factor),
    }
    for _ in range(steps):
        session.run(popart.PyStepIO(feed, anchors))
    session.weightsToHost()
    values = {w: np.empty([HIDDEN, HIDDEN], np.float32) for w in weights}
    session.readWeights(popart.PyWeightsIO(values))
    return [values[w] for w in weights]


def _check_accumulation_matches_full_batch(
    batches_per_step, multi_ipu, explicit_loops, optimizer=_sgd
):
    rng = np.random.RandomState(1234)  # the weights _model starts from
    start = [(1.0 - XI * rng.rand(HIDDEN, HIDDEN)).astype(np.float32) for _ in range(LAYERS)]
    accumulated = _train(
        4, True, batches_per_step, 3, multi_ipu, explicit_loops, optimizer=optimizer
    )
    full_batch = _train(
        1, False, batches_per_step, 3, multi_ipu, explicit_loops, optimizer=optimizer
    )
    for a, b, c in zip(accumulated, full_batch, start, strict=True):
        assert np.abs(a - c).sum() > 1e-3  # trained
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.follows("test_gradient_accumulation_base")
@EXPLICIT
def test_gradient_accumulation_base(explicit_loops):
    _check_accumulation_matches_full_batch(1, False, explicit_loops)


@pytest.mark.slow
@pytest.mark.follows("test_gradient_accumulation_multi_batch")
@EXPLICIT
def test_gradient_accumulation_multi_batch(explicit_loops):
    _check_accumulation_matches_full_batch(5, False, explicit_loops)


@pytest.mark.slow
@pytest.mark.follows("test_gradient_accumulation_multi_ipu")
@EXPLICIT
def test_gradient_accumulation_multi_ipu(explicit_loops):
    _check_accumulation_matches_full_batch(5, True, explicit_loops)


@pytest.mark.follows("test_gradient_accumulation_error_inference")
@EXPLICIT
def test_gradient_accumulation_error_inference(explicit_loops):
    with pytest.raises(popart.popart_exception) as e_info:
        _train(4, True, 5, 3, True, explicit_loops, inference=True)
    assert e_info.value.args[0].startswith("Gradient Accumulation only available when training")


@pytest.mark.follows("test_gradient_accumulation_error_accum_factor_invalid")
@EXPLICIT
def test_gradient_accumulation_error_accum_factor_invalid(explicit_loops):
    with pytest.raises(popart.popart_exception) as e_info:
        _train(4, False, 5, 3, True, explicit_loops)
    assert e_info.value.args[0].startswith(
        "enableGradientAccumulation is false, but accumulationFactor > 1."
    )


@pytest.mark.follows("test_adam_gradient_accumulation_base")
@EXPLICIT
def test_adam_gradient_accumulation_base(explicit_loops):
    _check_accumulation_matches_full_batch(1, False, explicit_loops, _adam)


@pytest.mark.slow
@pytest.mark.follows("test_adam_gradient_accumulation_multi_batch")
@EXPLICIT
def test_adam_gradient_accumulation_multi_batch(explicit_loops):
    _check_accumulation_matches_full_batch(5, False, explicit_loops, _adam)


@pytest.mark.slow
@pytest.mark.follows("test_adam_gradient_accumulation_multi_ipu")
@EXPLICIT
def test_adam_gradient_accumulation_multi_ipu(explicit_loops):
    _check_accumulation_matches_full_batch(5, True, explicit_loops, _adam)


ACCL = popart.reservedAcclPrefix()
STATE_PREFIXES = (
    popart.reservedAccumPrefix(),
    popart.reservedAccl1Prefix(),
    popart.reservedAccl2Prefix(),
    popart.reservedStepPrefix(),
)


def _momentum():
    # Momentum gives SGD an Accl___ tensor per weight.
    return popart.SGD({"defaultLearningRate": (0.1, False), "defaultMomentum": (0.9, True)})


def _accumulating_session(proto, loss, optimizer, explicit_loops, batches_per_step=1):
    options = popart.SessionOptions()
    options.enableGradientAccumulation = True
    options.accumulationFactor = 4
    options.disableGradAccumulationTensorStreams = False
    if explicit_loops:
        options.enableExplicitMainLoops = True
        options.aliasZeroCopy = True
        options.explicitRecomputation = True
        options.useHostCopyOps = True
    session = popart.TrainingSession(
        fnModel=proto,
        dataFlow=popart.DataFlow(batches_per_step, {loss: popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({}),
        loss=loss,
        optimizer=optimizer,
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    return session


def _run(session, ip, label, batches_per_step, steps):
    rng = np.random.RandomState(0)
    outer = [batches_per_step, 4] if batches_per_step > 1 else [4]
    feed = {
        ip: (1.0 - XI * rng.rand(*outer, BATCH // 4, HIDDEN)).astype(np.float32),
        label: rng.randint(0, HIDDEN, (*outer, BATCH // 4)).astype(np.int32),
    }
    anchors = session.initAnchorArrays()
    for _ in range(steps):
        session.run(popart.PyStepIO(feed, anchors))


def _initializers(session, path):
    session.modelToHost(str(path))
    return {t.name: t for t in onnx.load(str(path)).graph.initializer}


@pytest.mark.follows("test_gradient_accumulation_model_proto")
@EXPLICIT
def test_gradient_accumulation_model_proto(tmp_path, explicit_loops):
    proto, ip, label, loss, _ = _model(4, False)
    session = _accumulating_session(proto, loss, _momentum(), explicit_loops, 5)
    _run(session, ip, label, 5, 3)
    tensors = _initializers(session, tmp_path / "model.onnx")
    accls = [name for name in tensors if ACCL in name]
    weights = [name for name in tensors if ACCL not in name and "weight" in name]
    assert len(weights) == LAYERS
    assert sorted(accls) == sorted(ACCL + w for w in weights)
    for w in weights:
        # The original's (one-sided) check of the velocity against the weights.
        accl, weight = tensors[ACCL + w].float_data, tensors[w].float_data
        assert all(a - v * WD < 1e-8 for a, v in zip(accl, weight, strict=True))


@pytest.mark.follows("test_loading_saved_gradient_accumulationt_tensors")
@EXPLICIT
def test_loading_saved_gradient_accumulationt_tensors(tmp_path, explicit_loops):
    proto, ip, label, loss, _ = _model(4, False)
    assert not any(ACCL in t.name for t in onnx.load_from_string(proto).graph.initializer)
    session = _accumulating_session(proto, loss, _momentum(), explicit_loops)
    initial = _initializers(session, tmp_path / "initial.onnx")
    for name in [n for n in initial if ACCL not in n]:
        assert ACCL + name in initial
    _run(session, ip, label, 1, 1)
    trained_path = tmp_path / "trained.onnx"
    trained = _initializers(session, trained_path)
    for name in [n for n in trained if ACCL in n]:
        assert not np.allclose(trained[name].float_data, initial[name].float_data)
    reloaded = _initializers(
        _accumulating_session(str(trained_path), loss, _momentum(), explicit_loops),
        tmp_path / "check.onnx",
    )
    for name in [n for n in trained if ACCL in n]:
        np.testing.assert_array_equal(reloaded[name].float_data, trained[name].float_data)


@pytest.mark.follows("test_adam_gradient_accumulation_model_proto")
@EXPLICIT
@pytest.mark.parametrize("steps", [0, 3])
def test_adam_gradient_accumulation_model_proto(tmp_path, explicit_loops, steps):
    proto, ip, label, loss, _ = _model(4, False)
    session = _accumulating_session(proto, loss, _adam(), explicit_loops, 5)
    _run(session, ip, label, 5, steps)
    tensors = _initializers(session, tmp_path / "model.onnx")
    by_prefix = {p: [n for n in tensors if p in n] for p in STATE_PREFIXES}
    weights = [n for n in tensors if "weight" in n and not any(p in n for p in STATE_PREFIXES)]
    assert len(weights) == LAYERS
    for prefix in STATE_PREFIXES[1:]:
        assert sorted(by_prefix[prefix]) == sorted(prefix + w for w in weights)
    if steps == 0:
        for name in [n for names in by_prefix.values() for n in names]:
            assert np.allclose(tensors[name].float_data, 0.0)  # all Adam state starts at zero
    else:
        for name in by_prefix[popart.reservedStepPrefix()]:
            assert tensors[name].float_data[0] == steps * 5  # one step per weight update


@pytest.mark.follows("test_adam_loading_saved_gradient_accumulationt_tensors")
@EXPLICIT
def test_adam_loading_saved_gradient_accumulationt_tensors(tmp_path, explicit_loops):
    proto, ip, label, loss, _ = _model(4, False)
    assert not any(
        popart.reservedAccumPrefix() in t.name
        for t in onnx.load_from_string(proto).graph.initializer
    )
    session = _accumulating_session(proto, loss, _adam(), explicit_loops)
    initial = _initializers(session, tmp_path / "initial.onnx")
    state = [n for n in initial if any(p in n for p in STATE_PREFIXES)]
    assert state
    for name in state:
        assert np.allclose(initial[name].float_data, 0.0)
    _run(session, ip, label, 1, 1)
    trained_path = tmp_path / "trained.onnx"
    trained = _initializers(session, trained_path)
    for name in state:
        if popart.reservedAccumPrefix() in name:
            # The accumulator is zeroed once applied to accl1 and accl2.
            assert np.allclose(trained[name].float_data, 0.0)
        else:
            assert not np.allclose(trained[name].float_data, initial[name].float_data)
    reloaded = _initializers(
        _accumulating_session(str(trained_path), loss, _adam(), explicit_loops),
        tmp_path / "check.onnx",
    )
    for name in state:
        np.testing.assert_array_equal(reloaded[name].float_data, trained[name].float_data)
