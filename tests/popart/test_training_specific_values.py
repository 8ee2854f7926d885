"""Per-weight hyper-parameters (insertSpecific) of Adam and Adaptive, and a non-const value
changed by updateOptimizerFromHost, against the numpy references of
test_training_optimizers.py (SGD's per-weight values are tested there)."""

from __future__ import annotations

import numpy as np
from test_training_optimizers import (
    BATCHES_PER_STEP,
    STEPS,
    adam_reference,
    adaptive_reference,
    numpy_training,
)
from training_helpers import (
    build_regression,
    read_weights,
    regression_data,
    regression_gradients,
    train_session,
)

import popart


def per_weight(references):
    """An update that uses references[name] for weight `name`."""
    return lambda name, w, g, state: references[name](name, w, g, state)


def test_adam_per_weight_values():
    model = build_regression()
    mode, decay = popart.AdamMode.Adam, popart.WeightDecayMode.Decay
    optimizer = popart.Adam(
        {
            "defaultLearningRate": (0.02, False),
            "defaultBeta1": (0.8, True),
            "defaultWeightDecay": (0.01, True),
        },
        mode=mode,
        weight_decay_mode=decay,
    )
    optimizer.insertSpecific(
        model.b, {"learningRate": (0.1, False), "beta1": (0.5, True), "weightDecay": (0.0, True)}
    )
    assert optimizer.learningRates().getDefault().val() == 0.02
    x, t = regression_data(STEPS)
    _, weights, _ = train_session(model, optimizer, x, t, BATCHES_PER_STEP)
    params, _ = numpy_training(
        model,
        x,
        t,
        per_weight({
            "w": adam_reference(mode, decay, 0.02, 0.01, 0.8, 0.999, 1e-6, 10.0),
            "b": adam_reference(mode, decay, 0.1, 0.0, 0.5, 0.999, 1e-6, 10.0),
        }),
    )  # fmt: skip
    for name in params:
        np.testing.assert_allclose(weights[name], params[name], rtol=1e-4, atol=1e-5)


def test_adaptive_per_weight_values_and_a_non_const_update():
    model = build_regression()
    mode, decay = popart.AdaptiveMode.RMSProp, popart.WeightDecayMode.Decay
    optimizer = popart.Adaptive(
        {"defaultLearningRate": (0.01, False), "defaultAlpha": (0.9, True)},
        mode=mode,
        weight_decay_mode=decay,
    )
    optimizer.insertSpecific(model.b, {"learningRate": (0.05, False), "alpha": (0.5, True)})
    x, t = regression_data(STEPS)
    half = STEPS // 2
    session, _, _ = train_session(model, optimizer, x[:half], t[:half], BATCHES_PER_STEP)
    # The non-const learning rates change for the rest of the training (the state stays).
    changed = popart.Adaptive(
        {"defaultLearningRate": (0.002, False), "defaultAlpha": (0.9, True)},
        mode=mode,
        weight_decay_mode=decay,
    )
    changed.insertSpecific(model.b, {"learningRate": (0.02, False), "alpha": (0.5, True)})
    session.updateOptimizerFromHost(changed)
    session.run(popart.PyStepIO({model.x: x[half:], model.t: t[half:]}, {}))
    weights = read_weights(session, model)

    def reference(first, second, alpha):
        before = adaptive_reference(mode, decay, first, 0.0, alpha, 0.0, 1e-6)
        after = adaptive_reference(mode, decay, second, 0.0, alpha, 0.0, 1e-6)
        calls = {"count": 0}

        def update(name, w, g, state):
            calls["count"] += 1
            return (before if calls["count"] <= half else after)(name, w, g, state)

        return update

    params, _ = numpy_training(
        model, x, t, per_weight({"w": reference(0.01, 0.002, 0.9), "b": reference(0.05, 0.02, 0.5)})
    )
    for name in params:
        np.testing.assert_allclose(weights[name], params[name], rtol=1e-4, atol=1e-5)


def test_accumulator_and_state_types_with_gradient_accumulation():
    model = build_regression()
    options = popart.SessionOptions()
    options.enableGradientAccumulation = True
    options.accumulationFactor = 2
    half = popart.DataType.FLOAT16
    optimizers = {
        "sgd": popart.SGD(
            {"defaultLearningRate": (0.05, False), "defaultMomentum": (0.5, False)},
            accumulatorAndMomentum=popart.SGDAccumulatorAndMomentum.Separate,
            accumType=half,
            accl1Type=half,
        ),
        "adam": popart.Adam({"defaultLearningRate": (0.01, False)}, accum_type=half),
        "adaptive": popart.Adaptive(
            {"defaultLearningRate": (0.01, False)}, accum_type=half, accl1_type=half
        ),
    }
    expected_types = {
        "sgd": {"Accum___": "FLOAT16", "Accl1___": "FLOAT16"},
        "adam": {"Accum___": "FLOAT16", "Accl1___": "FLOAT", "Accl2___": "FLOAT"},
        "adaptive": {"Accum___": "FLOAT16", "Accl1___": "FLOAT16"},
    }
    x, t = regression_data(4)
    for kind, optimizer in optimizers.items():
        session, weights, _ = train_session(
            model, optimizer, x.reshape(2, 2, 4, 3), t.reshape(2, 2, 4, 2), 1, options=options
        )
        for prefix, data_type in expected_types[kind].items():
            assert session.getInfo(prefix + model.w).data_type() == data_type, (kind, prefix)
        if kind == "sgd":
            # Each update takes the sum (ReductionType.Sum) of two micro-batches' gradients.
            params = {k: model.initial[getattr(model, k)].astype(np.float64) for k in ("w", "b")}
            velocity = {k: 0.0 for k in params}
            for step in range(2):
                grads = [
                    regression_gradients(params, x[2 * step + k], t[2 * step + k]) for k in (0, 1)
                ]
                for k in params:
                    velocity[k] = 0.5 * velocity[k] + grads[0][k] + grads[1][k]
                    params[k] = params[k] - 0.05 * velocity[k]
            for k in params:
                np.testing.assert_allclose(weights[k], params[k], rtol=1e-2, atol=1e-3)
