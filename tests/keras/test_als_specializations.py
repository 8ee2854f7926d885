"""`ALSOptimizerSGD`, `ALSOptimizerAdam`, `ALSOptimizerRMSProp`: their updates take the
loss-scaled gradients and keep their moments scaled, by the formulas of graphcore/keras
(gradient_descent.py, adam.py, rmsprop.py), checked step by step against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.keras.ipu.optimizers import ALSOptimizerAdam, ALSOptimizerRMSProp, ALSOptimizerSGD

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 3)).astype(np.float32)
T = RNG.normal(size=(8, 2)).astype(np.float32)
W0 = RNG.normal(size=(3, 2)).astype(np.float32)
STEPS = 3
# An update due every step, no float16 gradient: the factor doubles each step (1, 2, 4, 8).
ALS = {"initial_loss_scaling_factor": 1, "update_frequency": 1, "increase_factor": 2}


def _true_gradient(w):
    return X.T @ (2.0 * (X @ w - T) / T.size)


def _run(strategy, opt):
    with strategy.scope():
        w = tf.Variable(W0)

        @tf.function(jit_compile=True)
        def step():
            loss = tf.reduce_mean(tf.square(tf.matmul(X, w) - T))
            (gradient,) = opt.get_gradients(loss, [w])
            opt.apply_gradients([(gradient, w)])

        for _ in range(STEPS):
            strategy.run(step)
    return w.numpy()


def _factors():
    """(sigma before the step, sigma after its update) of each step."""
    return [(2.0**k, 2.0 ** (k + 1)) for k in range(STEPS)]


def test_sgd_with_momentum(strategy_on):
    ours = _run(strategy_on(1), ALSOptimizerSGD(0.1, momentum=0.5, **ALS))
    w, m = W0.astype(np.float64), np.zeros_like(W0, np.float64)
    for previous, sigma in _factors():
        scaled = previous * _true_gradient(w)
        m = 0.5 * sigma / previous * m + scaled
        w = w - (0.1 / sigma) * m
    np.testing.assert_allclose(ours, w, rtol=1e-5)


def test_adam(strategy_on):
    ours = _run(strategy_on(1), ALSOptimizerAdam(0.01, **ALS))
    w = W0.astype(np.float64)
    m, v = np.zeros_like(w), np.zeros_like(w)
    for step, (previous, sigma) in enumerate(_factors(), start=1):
        scaled = previous * _true_gradient(w)
        v = v * 0.999 * sigma * sigma + 0.001 * scaled * scaled
        m = m * 0.9 * sigma + 0.1 * scaled
        eta = 0.01 * np.sqrt(1 - 0.999**step) / (1 - 0.9**step)
        w = w - eta * m / (np.sqrt(v) + 1e-7 * sigma)
    np.testing.assert_allclose(ours, w, rtol=1e-5)


@pytest.mark.parametrize("momentum", [0.0, 0.3])
def test_rmsprop(strategy_on, momentum):
    ours = _run(strategy_on(1), ALSOptimizerRMSProp(0.01, momentum=momentum, **ALS))
    w = W0.astype(np.float64)
    m, v = np.zeros_like(w), np.zeros_like(w)
    beta = 0.0  # the original reads the `decay` hyperparameter here
    for previous, sigma in _factors():
        scaled = previous * _true_gradient(w)
        v = (sigma / previous) ** 2 * beta * v + (1 - beta) * scaled * scaled
        m = m * momentum + scaled / np.sqrt(v + 1e-7 * sigma * sigma)
        w = w - 0.01 * m
    np.testing.assert_allclose(ours, w, rtol=1e-5)


def test_config_round_trip_and_checks():
    opt = ALSOptimizerSGD(0.2, momentum=0.1, initial_loss_scaling_factor=4, update_frequency=3)
    config = opt.get_config()
    assert config["learning_rate"] == pytest.approx(0.2) and config["momentum"] == pytest.approx(
        0.1
    )
    rebuilt = ALSOptimizerSGD.from_config(config)
    assert rebuilt.update_frequency == 3 and rebuilt.initial_loss_scaling_factor == 4
    adam = ALSOptimizerAdam.from_config(ALSOptimizerAdam(beta_1=0.8).get_config())
    assert float(adam.beta_1) == pytest.approx(0.8)
    # The wrapped optimizer is made first, and checks the factor first (as in the original).
    with pytest.raises(ValueError, match="loss_scale_factor must be a power of two"):
        ALSOptimizerRMSProp(initial_loss_scaling_factor=3)


def _fit(strategy, optimizer):
    with strategy.scope():
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.compile(optimizer, "mse", steps_per_execution=2)
        history = model.fit(X, T, batch_size=4, epochs=3, shuffle=False, verbose=0)
    return model, history


def test_keras_fit_with_als_sgd_matches_sgd_while_the_factor_holds(strategy_on):
    # Six steps, the first factor update is due after eight: sigma stays 8, and the scaled
    # gradients divided by it are SGD's.
    strategy = strategy_on(1)
    model, history = _fit(strategy, ALSOptimizerSGD(0.05, initial_loss_scaling_factor=8))
    reference, expected = _fit(strategy, keras.optimizers.SGD(0.05))
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"], rtol=1e-5)
