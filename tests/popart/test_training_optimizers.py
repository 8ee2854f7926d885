"""SGD, ConstSGD, Adam and Adaptive in a TrainingSession, step by step against numpy
implementations of the fact sheet's formulas (notes/popart-inventory.md, 13.4), over six
updates: the weights, and the optimizer state through its reserved-name anchors."""

from __future__ import annotations

import numpy as np
import pytest
from training_helpers import build_regression, regression_data, regression_gradients, train_session

import popart

STEPS, BATCHES_PER_STEP = 6, 3


def numpy_training(model, x, t, update):
    """Runs `update(name, w, g, state) -> (w, state)` over STEPS batches, in float64."""
    params = {
        "w": model.initial["w"].astype(np.float64),
        "b": model.initial["b"].astype(np.float64),
    }
    states = {"w": {}, "b": {}}
    for step in range(STEPS):
        gradients = regression_gradients(params, x[step], t[step])
        for name in params:
            params[name], states[name] = update(name, params[name], gradients[name], states[name])
    return params, states


def check(session_weights, arrays, params, states, state_names, rtol=1e-5, atol=1e-6):
    for name in ("w", "b"):
        np.testing.assert_allclose(session_weights[name], params[name], rtol=rtol, atol=atol)
        for prefix, key in state_names.items():
            np.testing.assert_allclose(
                arrays[prefix + name], states[name][key], rtol=rtol, atol=atol, err_msg=prefix
            )


# -- SGD ---------------------------------------------------------------------------------------


def sgd_reference(values: dict[str, dict[str, float]], keeps_velocity: bool):
    def update(name, w, g, state):
        h = values[name]
        regularised = g + h["wd"] * w
        if not keeps_velocity:
            return w - h["lr"] * (1 - h["dm"]) * regularised, state
        v = state.get("v", 0.0) * h["mm"] + h["vs"] * (1 - h["dm"]) * regularised
        if h["nesterov"]:
            return w - h["lr"] * (regularised + h["mm"] * v / h["vs"]), {"v": v}
        return w - h["lr"] / h["vs"] * v, {"v": v}

    return update


def _sgd_values(lr=0.1, wd=0.0, mm=0.0, dm=0.0, vs=1.0, nesterov=False):
    return {"lr": lr, "wd": wd, "mm": mm, "dm": dm, "vs": vs, "nesterov": nesterov}


SGD_CASES = {
    "no velocity, weight decay and dampening": (
        {
            "defaultLearningRate": (0.05, False),
            "defaultWeightDecay": (0.01, True),
            "defaultDampening": (0.2, True),
        },
        {},
        _sgd_values(lr=0.05, wd=0.01, dm=0.2),
        None,
    ),
    "momentum, dampening, velocity and loss scaling": (
        {
            "defaultLearningRate": (0.05, True),
            "defaultMomentum": (0.9, True),
            "defaultDampening": (0.1, False),
            "defaultVelocityScaling": (4.0, True),
            "defaultWeightDecay": (0.01, False),
            "lossScaling": (16.0, True),
        },
        {},
        _sgd_values(lr=0.05, wd=0.01, mm=0.9, dm=0.1, vs=4.0),
        None,
    ),
    "nesterov": (
        {
            "defaultLearningRate": (0.05, True),
            "defaultMomentum": (0.8, True),
            "defaultWeightDecay": (0.02, True),
            "nesterov": (True, True),
        },
        {},
        _sgd_values(lr=0.05, wd=0.02, mm=0.8, nesterov=True),
        None,
    ),
    "separate accumulator, per-weight values": (
        {"defaultLearningRate": (0.05, False), "defaultMomentum": (0.7, False)},
        {"accumulatorAndMomentum": popart.SGDAccumulatorAndMomentum.Separate},
        _sgd_values(lr=0.05, mm=0.7),
        {"learningRate": (0.01, False), "momentum": (0.5, True), "velocityScaling": (2.0, True)},
    ),
}


@pytest.mark.parametrize("case", list(SGD_CASES))
def test_sgd_against_numpy(case):
    values, keywords, reference_values, specific_b = SGD_CASES[case]
    model = build_regression()
    optimizer = popart.SGD(values, **keywords)
    per_weight = {"w": reference_values, "b": dict(reference_values)}
    if specific_b is not None:
        optimizer.insertSpecific(model.b, specific_b)
        per_weight["b"].update(lr=0.01, mm=0.5, vs=2.0)
    keeps_velocity = (
        reference_values["mm"] != 0 or not values["defaultMomentum"][1]
        if "defaultMomentum" in values
        else False
    )
    x, t = regression_data(STEPS)
    # The velocity is `Accl___<w>` (Combined) or `Accl1___<w>` (Separate), as the original's.
    separate = keywords.get("accumulatorAndMomentum") == popart.SGDAccumulatorAndMomentum.Separate
    velocity = popart.reservedAccl1Prefix() if separate else popart.reservedAcclPrefix()
    anchors = [velocity + name for name in ("w", "b")] if keeps_velocity else []
    _, weights, arrays = train_session(model, optimizer, x, t, BATCHES_PER_STEP, anchors=anchors)
    params, states = numpy_training(model, x, t, sgd_reference(per_weight, keeps_velocity))
    check(
        weights,
        arrays,
        params,
        states,
        {velocity: "v"} if keeps_velocity else {},
    )


def test_sgd_clip_norm_scales_gradients_to_the_global_norm():
    model = build_regression()
    max_norm = 0.3
    optimizer = popart.SGD(
        {"defaultLearningRate": (0.1, True), "defaultMomentum": (0.5, True)},
        clip_norm_settings=[popart.ClipNormSettings.clipAllWeights(max_norm)],
    )
    x, t = regression_data(STEPS)
    _, weights, _ = train_session(model, optimizer, x, t, BATCHES_PER_STEP)
    params = {
        k: v.astype(np.float64) for k, v in (("w", model.initial["w"]), ("b", model.initial["b"]))
    }
    velocity = {k: 0.0 for k in params}
    for step in range(STEPS):
        gradients = regression_gradients(params, x[step], t[step])
        norm = np.sqrt(sum(np.sum(g**2) for g in gradients.values()))
        for name in params:
            g = gradients[name] * max_norm / max(max_norm, norm)
            velocity[name] = velocity[name] * 0.5 + g
            params[name] = params[name] - 0.1 * velocity[name]
    for name in params:
        np.testing.assert_allclose(weights[name], params[name], rtol=1e-5, atol=1e-6)


def test_const_sgd_is_sgd_with_const_values():
    model = build_regression()
    optimizer = popart.ConstSGD(0.05, weight_decay=0.01, loss_scaling=8.0)
    assert optimizer.learningRates().getDefault().isConst()
    assert optimizer.getLossScalingVal() == 8.0
    x, t = regression_data(STEPS)
    _, weights, _ = train_session(model, optimizer, x, t, BATCHES_PER_STEP)
    values = _sgd_values(lr=0.05, wd=0.01)
    params, _ = numpy_training(model, x, t, sgd_reference({"w": values, "b": values}, False))
    for name in params:
        np.testing.assert_allclose(weights[name], params[name], rtol=1e-5, atol=1e-6)


# -- Adam --------------------------------------------------------------------------------------


def adam_reference(mode, decay_mode, lr, wd, b1, b2, eps, max_norm, loss_scaling=1.0, scaled=False):
    no_bias = mode in (popart.AdamMode.AdamNoBias, popart.AdamMode.LambNoBias)
    lamb = mode in (popart.AdamMode.Lamb, popart.AdamMode.LambNoBias)
    l2 = decay_mode is popart.WeightDecayMode.L2Regularization
    unit = loss_scaling if scaled else 1.0  # the state's scale

    def update(name, w, g, state):
        m, v, t = state.get("m", 0.0), state.get("v", 0.0), state.get("t", 0.0)
        g_tmp = (g + wd * w if l2 else g) * unit
        m = b1 * m + (1 - b1) * g_tmp
        if mode is popart.AdamMode.AdaMax:
            v = np.maximum(b2 * v, np.abs(g_tmp))
        else:
            v = b2 * v + (1 - b2) * g_tmp**2
        t = t + 1
        m_tmp = m / unit if no_bias else m / unit / (1 - b1**t)
        if mode is popart.AdamMode.AdaMax:  # the original's implementation (see adam.py)
            u = m_tmp / (v / unit + eps)
        else:
            v_tmp = v / unit**2 if no_bias else v / unit**2 / (1 - b2**t)
            u = m_tmp / (np.sqrt(v_tmp) + eps)
        if not l2:
            u = u + wd * w
        if lamb:
            r1, r2 = min(np.linalg.norm(w), max_norm), np.linalg.norm(u)
            ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
            return w - ratio * lr * u, {"m": m, "v": v, "t": t}
        return w - lr * u, {"m": m, "v": v, "t": t}

    return update


ADAM_CASES = [
    (popart.AdamMode.Adam, popart.WeightDecayMode.Decay, {}),
    (popart.AdamMode.Adam, popart.WeightDecayMode.L2Regularization, {"ls": 32.0}),
    (popart.AdamMode.AdamNoBias, popart.WeightDecayMode.Decay, {}),
    (popart.AdamMode.AdaMax, popart.WeightDecayMode.L2Regularization, {}),
    (popart.AdamMode.Lamb, popart.WeightDecayMode.Decay, {}),
    (popart.AdamMode.LambNoBias, popart.WeightDecayMode.L2Regularization, {}),
    (popart.AdamMode.Adam, popart.WeightDecayMode.Decay, {"ls": 16.0, "scaled": True}),
]


@pytest.mark.parametrize(
    "mode, decay_mode, extra", ADAM_CASES, ids=[f"{m.name}-{d.name}-{e}" for m, d, e in ADAM_CASES]
)
def test_adam_against_numpy(mode, decay_mode, extra):
    model = build_regression()
    lr, wd, b1, b2, eps, max_norm = 0.02, 0.01, 0.8, 0.95, 1e-5, 1.0
    loss_scaling = extra.get("ls", 1.0)
    optimizer = popart.Adam(
        {
            "defaultLearningRate": (lr, False),
            "defaultWeightDecay": (wd, True),
            "defaultBeta1": (b1, True),
            "defaultBeta2": (b2, False),
            "defaultEps": (eps, True),
            "defaultMaxWeightNorm": (max_norm, True),
            "lossScaling": (loss_scaling, False),
        },
        mode=mode,
        weight_decay_mode=decay_mode,
        scaled_optimizer_state=extra.get("scaled", False),
    )
    x, t = regression_data(STEPS)
    prefixes = {
        popart.reservedAccl1Prefix(): "m",
        popart.reservedAccl2Prefix(): "v",
        popart.reservedStepPrefix(): "t",
    }
    anchors = [prefix + name for prefix in prefixes for name in ("w", "b")]
    _, weights, arrays = train_session(model, optimizer, x, t, BATCHES_PER_STEP, anchors=anchors)
    update = adam_reference(
        mode, decay_mode, lr, wd, b1, b2, eps, max_norm, loss_scaling, extra.get("scaled", False)
    )
    params, states = numpy_training(model, x, t, update)
    check(weights, arrays, params, states, prefixes, rtol=1e-4, atol=1e-5)


def test_adam_state_types():
    model = build_regression()
    optimizer = popart.Adam(
        {"defaultLearningRate": (0.02, True)},
        accl1_type=popart.DataType.FLOAT16,
        accl2_type=popart.DataType.FLOAT,
    )
    x, t = regression_data(STEPS)
    anchors = [popart.reservedAccl1Prefix() + "w", popart.reservedAccl2Prefix() + "w"]
    session, weights, arrays = train_session(
        model, optimizer, x, t, BATCHES_PER_STEP, anchors=anchors
    )
    assert arrays[anchors[0]].dtype == np.float16
    assert arrays[anchors[1]].dtype == np.float32
    assert session.getInfo(model.w).data_type() == "FLOAT"
    update = adam_reference(
        popart.AdamMode.Adam, popart.WeightDecayMode.Decay, 0.02, 0, 0.9, 0.999, 1e-6, 10
    )
    params, states = numpy_training(model, x, t, update)
    np.testing.assert_allclose(arrays[anchors[0]], states["w"]["m"], rtol=2e-3, atol=1e-4)
    np.testing.assert_allclose(weights["w"], params["w"], rtol=1e-3, atol=1e-4)


# -- Adaptive ----------------------------------------------------------------------------------


def adaptive_reference(mode, decay_mode, lr, wd, alpha, momentum, eps, tf_variant=False):
    Mode = popart.AdaptiveMode
    l2 = decay_mode is popart.WeightDecayMode.L2Regularization

    def update(name, w, g, state):
        s = g + wd * w if l2 else g
        # TensorFlow's RMSProp starts its mean square at one (the original's tf variant too).
        v1 = state.get("v1", 1.0 if tf_variant else 0.0)
        v2 = state.get("v2", 0.0)
        v1 = v1 + s**2 if mode is Mode.AdaGrad else alpha * v1 + (1 - alpha) * s**2
        if mode is Mode.AdaDelta:
            x = s * np.sqrt(v2 + eps) / np.sqrt(v1 + eps)
            v2 = alpha * v2 + (1 - alpha) * x**2
        elif mode is Mode.CenteredRMSProp:
            v2 = alpha * v2 + (1 - alpha) * s
            x = s / np.sqrt(v1 - v2**2 + eps) if tf_variant else s / (np.sqrt(v1 - v2**2) + eps)
        else:
            x = s / np.sqrt(v1 + eps) if tf_variant else s / (np.sqrt(v1) + eps)
        decay = 0.0 if l2 else wd * w
        new = {"v1": v1, "v2": v2}
        if momentum == 0:
            return w - lr * (decay + x), new
        if tf_variant:
            new["v3"] = momentum * state.get("v3", 0.0) + lr * x
            return w - (decay + new["v3"]), new
        new["v3"] = momentum * state.get("v3", 0.0) + x
        return w - lr * (decay + new["v3"]), new

    return update


ADAPTIVE_CASES = [
    (popart.AdaptiveMode.AdaGrad, popart.WeightDecayMode.Decay, dict(lr=0.1, wd=0.0, momentum=0.0)),
    (
        popart.AdaptiveMode.RMSProp,
        popart.WeightDecayMode.Decay,
        dict(lr=0.01, wd=0.01, momentum=0.5),
    ),
    (
        popart.AdaptiveMode.CenteredRMSProp,
        popart.WeightDecayMode.L2Regularization,
        dict(lr=0.01, wd=0.01, momentum=0.0),
    ),
    (
        popart.AdaptiveMode.AdaDelta,
        popart.WeightDecayMode.Decay,
        dict(lr=1.0, wd=0.0, momentum=0.0),
    ),
    (
        popart.AdaptiveMode.RMSProp,
        popart.WeightDecayMode.Decay,
        dict(lr=0.01, wd=0.01, momentum=0.9, tf=True),
    ),
    (
        popart.AdaptiveMode.CenteredRMSProp,
        popart.WeightDecayMode.Decay,
        dict(lr=0.01, wd=0.0, momentum=0.0, tf=True),
    ),
]


@pytest.mark.parametrize(
    "mode, decay_mode, values",
    ADAPTIVE_CASES,
    ids=[f"{m.name}-{d.name}-{'tf' if v.get('tf') else 'popart'}" for m, d, v in ADAPTIVE_CASES],
)
def test_adaptive_against_numpy(mode, decay_mode, values):
    model = build_regression()
    alpha, eps = 0.9, 1e-4
    optimizer = popart.Adaptive(
        {
            "defaultLearningRate": (values["lr"], False),
            "defaultWeightDecay": (values["wd"], True),
            "defaultAlpha": (alpha, True),
            "defaultMomentum": (values["momentum"], True),
            "defaultEps": (eps, True),
            "lossScaling": (4.0, True),
        },
        mode=mode,
        weight_decay_mode=decay_mode,
        rmsprop_tf_variant=values.get("tf", False),
    )
    prefixes = {popart.reservedAccl1Prefix(): "v1"}
    if mode in (popart.AdaptiveMode.CenteredRMSProp, popart.AdaptiveMode.AdaDelta):
        prefixes[popart.reservedAccl2Prefix()] = "v2"
    if values["momentum"]:
        prefixes[popart.reservedAccl3Prefix()] = "v3"
    anchors = [prefix + name for prefix in prefixes for name in ("w", "b")]
    x, t = regression_data(STEPS)
    _, weights, arrays = train_session(model, optimizer, x, t, BATCHES_PER_STEP, anchors=anchors)
    update = adaptive_reference(
        mode,
        decay_mode,
        values["lr"],
        values["wd"],
        alpha,
        values["momentum"],
        eps,
        values.get("tf", False),
    )
    params, states = numpy_training(model, x, t, update)
    check(weights, arrays, params, states, prefixes, rtol=1e-4, atol=1e-5)
