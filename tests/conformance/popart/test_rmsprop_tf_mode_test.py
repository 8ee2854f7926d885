"""graphcore/popart tests/integration/optimizer_tests/rmsprop_tf_mode_test.py: training with
`popart.Adaptive` in (centered) RMSProp mode matches a numpy RMSProp of TensorFlow's variant
(eps inside the square root, the rms accumulator starting at one) when
`rmsprop_tf_variant=True`, and differs from it when False, with constant or streamed
learning rate and weight decay, both weight-decay modes, with and without momentum (Cpu).
Fewer steps and parameter combinations than the original, to stay fast."""

import numpy as np
import pytest

import popart

INPUT_DIM = 3
STEPS = 3
BATCHES_PER_STEP = 2
SAMPLES_PER_BATCH = 4
ALPHA = 0.95
EPS = 0.001


def _rmsprop(lr, const_lr, momentum, wd, wd_mode, const_wd, mode, tf_variant):
    return popart.Adaptive(
        {
            "defaultLearningRate": (lr, const_lr),
            "defaultAlpha": (ALPHA, True),
            "defaultMomentum": (momentum, True),
            "defaultEps": (EPS, True),
            "defaultWeightDecay": (wd, const_wd),
        },
        mode=mode,
        weight_decay_mode=wd_mode,
        rmsprop_tf_variant=tf_variant,
    )


def _numpy_update(var, g, mg, rms, mom, lr, momentum, wd, wd_mode, centered):
    """TensorFlow's RMSProp (eps inside the square root), PopART's weight-decay modes."""
    if wd > 0.0 and wd_mode == popart.WeightDecayMode.L2Regularization:
        g = g + wd * var
    rms = ALPHA * rms + (1 - ALPHA) * g * g
    denominator = rms + EPS
    if centered:
        mg = ALPHA * mg + (1 - ALPHA) * g
        denominator = denominator - mg * mg
    mom = (momentum * mom + lr * g / np.sqrt(denominator)).astype(var.dtype)
    if wd > 0.0 and wd_mode == popart.WeightDecayMode.Decay:
        # With momentum the decay is not scaled by the learning rate (as the original's numpy).
        var = var - ((wd if momentum > 0.0 else lr * wd) * var + mom)
    else:
        var = var - mom
    return var, mg, rms, mom


def _l1_grads(w0, w1, x):
    """Gradients of mean(|x * w0 + w1|) over one sample's elements."""
    sign = np.where(x * w0 + w1 < 0, -1, 1).astype(w0.dtype) / w0.size
    return x * sign, sign


CASES = [
    # dtype, tf_variant, const_lr, mode, momentum, wd, wd_mode, const_wd
    ("float32", True, True, "RMSProp", 0.0, 0.0, "L2Regularization", True),
    ("float32", True, False, "CenteredRMSProp", 0.9, 1e-2, "Decay", False),
    ("float32", True, True, "RMSProp", 0.9, 1e-2, "L2Regularization", False),
    ("float32", True, False, "RMSProp", 0.0, 1e-2, "Decay", True),
    ("float32", False, True, "RMSProp", 0.0, 0.0, "L2Regularization", True),
    ("float32", False, False, "CenteredRMSProp", 0.9, 1e-2, "Decay", True),
    ("float16", True, False, "CenteredRMSProp", 0.0, 1e-2, "L2Regularization", False),
]


@pytest.mark.follows("test_rmsprop_tf_mode")
@pytest.mark.parametrize(
    "dtype,tf_variant,const_lr,mode,momentum,weight_decay,wd_mode,const_wd", CASES
)
def test_rmsprop_tf_mode(
    dtype, tf_variant, const_lr, mode, momentum, weight_decay, wd_mode, const_wd
):
    dtype = np.dtype(dtype)
    mode = getattr(popart.AdaptiveMode, mode)
    wd_mode = getattr(popart.WeightDecayMode, wd_mode)
    np.random.seed(0)
    learning_rates = np.linspace(0.02, 0.00001, STEPS)
    weight_decays = np.linspace(weight_decay, weight_decay + 0.01, STEPS)
    w0_data = np.random.randn(INPUT_DIM, INPUT_DIM).astype(dtype)
    w1_data = np.random.randn(INPUT_DIM, INPUT_DIM).astype(dtype)
    shape = [SAMPLES_PER_BATCH, INPUT_DIM, INPUT_DIM]
    inputs = [np.random.randn(BATCHES_PER_STEP, *shape).astype(dtype) for _ in range(STEPS)]

    builder = popart.Builder()
    x = builder.addInputTensor(
        popart.TensorInfo("FLOAT" if dtype == np.float32 else "FLOAT16", shape)
    )
    w0 = builder.addInitializedInputTensor(w0_data)
    w1 = builder.addInitializedInputTensor(w1_data)
    loss = builder.aiGraphcore.l1loss([builder.aiOnnx.add([builder.aiOnnx.mul([x, w0]), w1])], 1.0)

    def optimizer(step):
        lr = learning_rates[0 if const_lr else step]
        wd = weight_decays[0 if const_wd else step]
        return _rmsprop(lr, const_lr, momentum, wd, wd_mode, const_wd, mode, tf_variant)

    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(BATCHES_PER_STEP, {}),
        loss=loss,
        optimizer=optimizer(0),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    session.weightsFromHost()
    for step in range(STEPS):
        session.run(popart.PyStepIO({x: inputs[step]}, anchors))
        if step < STEPS - 1 and not (const_lr and const_wd):
            session.updateOptimizerFromHost(optimizer(step + 1))
    session.weightsToHost()
    trained = {w0: np.zeros_like(w0_data), w1: np.zeros_like(w1_data)}
    session.readWeights(popart.PyWeightsIO(trained))

    centered = mode == popart.AdaptiveMode.CenteredRMSProp
    weights = [w0_data.copy(), w1_data.copy()]
    # Accl1 (rms) and Accl2 (mean gradient) are float32 by default, Accl3 the weights' type.
    state = [
        [np.zeros(w.shape, np.float32), np.ones(w.shape, np.float32), np.zeros_like(w)]
        for w in weights
    ]
    for step in range(STEPS):
        lr = learning_rates[0 if const_lr else step]
        wd = weight_decays[0 if const_wd else step]
        for batch in inputs[step]:
            grads = [np.zeros_like(w) for w in weights]
            for sample in batch:
                for g, s in zip(grads, _l1_grads(*weights, sample), strict=True):
                    g += s / SAMPLES_PER_BATCH
            for n in range(2):
                weights[n], *state[n] = _numpy_update(
                    weights[n], grads[n], *state[n], lr, momentum, wd,
                    wd_mode, centered,
                )  # fmt: skip

    if tf_variant:
        atol = 1e-5 if dtype == np.float32 else 1e-3 * STEPS * BATCHES_PER_STEP * SAMPLES_PER_BATCH
        np.testing.assert_allclose(trained[w0], weights[0], rtol=1e-2, atol=atol)
        np.testing.assert_allclose(trained[w1], weights[1], rtol=1e-2, atol=atol)
    else:
        assert not np.allclose(trained[w0], weights[0], rtol=1e-2, atol=1e-5)
        assert not np.allclose(trained[w1], weights[1], rtol=1e-2, atol=1e-5)
