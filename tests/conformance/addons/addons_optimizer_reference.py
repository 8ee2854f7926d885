"""Shared by the addons optimizer conformance modules: the original's fixed variables and
gradients, numpy update rules (from the original tests' formulas), and the tiny Keras
model (`test_util.py`'s `OptimizerTest`) trained on one sample under a precision policy.
"""

from __future__ import annotations

import itertools

import numpy as np
import tensorflow as tf
import tf_keras as keras

VARIABLES = (np.array([1.0, 1.0, 2.0], np.float32), np.array([3.0, 3.0, 4.0], np.float32))
GRADIENTS = (np.array([0.1, 0.0, 0.1], np.float32), np.array([0.01, 0.0, 0.01], np.float32))
STEPS = 3


def inverse_time_decay(learning_rate: float, decay: float = 0.5):
    """The original's schedule (decay_steps 1) and its value at step t."""
    schedule = keras.optimizers.schedules.InverseTimeDecay(
        learning_rate, decay_steps=1.0, decay_rate=decay
    )
    return schedule, lambda t: learning_rate / (1 + decay * t)


def run(optimizer, slot_names=(), steps: int = STEPS):
    """Applies the fixed gradients `steps` times; per step, the variables and their slots."""
    variables = [tf.Variable(v, name=f"var{i}") for i, v in enumerate(VARIABLES)]
    gradients = [tf.constant(g) for g in GRADIENTS]
    history = []
    for _ in range(steps):
        optimizer.apply_gradients(zip(gradients, variables, strict=True))
        slots = {
            name: [optimizer.get_slot(v, name).numpy() for v in variables] for name in slot_names
        }
        history.append(([v.numpy() for v in variables], slots))
    return history


def adam_numpy(param, g, t, m, v, lr, beta_1, beta_2, epsilon, debiasing, v_max=None):
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g * g
    m_hat, v_hat = (
        (m / (1 - beta_1 ** (t + 1)), v / (1 - beta_2 ** (t + 1))) if debiasing else (m, v)
    )
    if v_max is not None:
        v_hat = np.maximum(v_max, v_hat)
        v_max = v_hat
    return param - lr * m_hat / (np.sqrt(v_hat) + epsilon), m, v, v_max


def simple_model(optimizer, policy: str):
    keras.mixed_precision.set_global_policy(keras.mixed_precision.Policy(policy))
    inputs = keras.Input(shape=(5,), name="digits")
    x = keras.layers.Dense(5, activation="relu", name="dense_1")(inputs)
    outputs = keras.layers.Activation("softmax", dtype="float32", name="predictions")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(loss="sparse_categorical_crossentropy", optimizer=optimizer, metrics=["accuracy"])
    return model


def train_simple_model_on_sample(optimizer, policy: str):
    model = simple_model(optimizer, policy)
    model.fit(np.ones((1, 5), np.float32), np.array([1.0], np.float32), batch_size=1, verbose=0)
    return model


def check_weights_round_trip(model, make_optimizer, policy: str, directory) -> None:
    """save_weights / load_weights into a fresh model with a fresh optimizer keeps them."""
    old = model.get_weights()
    model.save_weights(str(directory / "weights"))
    fresh = simple_model(make_optimizer(), policy)
    fresh.load_weights(str(directory / "weights"))
    for before, after in zip(old, fresh.get_weights(), strict=True):
        np.testing.assert_array_equal(before, after)


def reset_policy():
    keras.mixed_precision.set_global_policy(None)  # back to the default (floatx) policy


def slow_beyond(cases, quick: int) -> list:
    """The first `quick` parameter sets as they are, the rest marked slow (still run in CI)."""
    import pytest

    return [
        case if i < quick else pytest.param(*case, marks=pytest.mark.slow)
        for i, case in enumerate(cases)
    ]


def beta_powers(optimizer) -> tuple[float, float]:
    """beta_1 and beta_2 to the power of the next step (the original's
    `get_beta_accumulators`)."""
    step = tf.cast(optimizer.iterations + 1, tf.float32)
    return (
        float(tf.pow(optimizer._get_hyper("beta_1", tf.float32), step)),
        float(tf.pow(optimizer._get_hyper("beta_2", tf.float32), step)),
    )


def check_moment_dtypes(make_optimizer, policy: str, m_dtype, v_dtype, directory) -> None:
    """Trains the simple model under `policy`: the m and v slots have the requested
    dtypes (else the variable's), and the weights survive save/load."""
    try:
        optimizer = make_optimizer()
        model = train_simple_model_on_sample(optimizer, policy)
        variable = model.layers[1].trainable_variables[0]
        assert optimizer.get_slot(variable, "m").dtype == (m_dtype or variable.dtype)
        assert optimizer.get_slot(variable, "v").dtype == (v_dtype or variable.dtype)
        check_weights_round_trip(model, make_optimizer, policy, directory)
    finally:
        reset_policy()


def moment_dtype_cases(precisions: list) -> list:
    """(policy, m_dtype, v_dtype, compute precisions, debiasing) of the original's product:
    16 of its 108 combinations (every policy, dtype and precision occurs), 3 quick."""
    cases = itertools.product(
        ["mixed_float16", "float16", "float32"],
        [tf.float16, tf.float32, None],
        [tf.float16, tf.float32, None],
        precisions,
        [True, False],
    )
    return slow_beyond(list(cases)[::7], quick=3)
