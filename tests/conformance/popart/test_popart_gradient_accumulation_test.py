"""graphcore/popart tests/integration/gradient_accumulation_test.py (part): training six
MatMuls with SGD or Adam (weight decay) and gradient accumulation over micro-batches gives the
weights of training on the whole batch at once, on one or two IPUs, over one or several
batches per step; accumulation is refused in inference and a factor above 1 without it.
The original runs them on an IPU Model; here on emulated IPUs. Its second model (Sin, Exp,
Conv, Softmax) and the scenarios reading accumulator tensors from saved models are not
ported yet."""

import numpy as np
import pytest

import popart

BATCH, HIDDEN = 12, 16
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
    for i in range(6):
        w = builder.addInitializedInputTensor(
            (1.0 - XI * rng.rand(HIDDEN, HIDDEN)).astype(np.float32), "weight"
        )
        weights.append(w)
        x = builder.aiOnnx.matmul([x, w])
        if multi_ipu:
            builder.virtualGraph(x, 1 if i > 3 else 0)
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
    start = [(1.0 - XI * rng.rand(HIDDEN, HIDDEN)).astype(np.float32) for _ in range(6)]
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
