"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/optimizers/keras_sgd_optimizer_test.py`.

`SGDIpuOptimizer`: three updates of two variables (with and without momentum and
Nesterov, a constant learning rate or an inverse-time-decay schedule) against the
original's numpy formulas, the momentum slot included; under Keras mixed precision
policies the slot has the requested dtype and weights survive save/load.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf
from addons_optimizer_reference import (
    GRADIENTS,
    STEPS,
    VARIABLES,
    check_weights_round_trip,
    inverse_time_decay,
    reset_policy,
    run,
    slow_beyond,
    train_simple_model_on_sample,
)

from ipu_tensorflow_addons.keras.optimizers import SGDIpuOptimizer

PRODUCT = list(itertools.product([0.01, 0.001], [0.0, 0.9], [False, True]))


def _expected(learning_rate_at, momentum, nesterov):
    params = [v.copy() for v in VARIABLES]
    accums = [0.0, 0.0]
    history = []
    for t in range(STEPS):
        lr = learning_rate_at(t)
        for i, g in enumerate(GRADIENTS):
            accums[i] = accums[i] * momentum - lr * g
            params[i] = params[i] + (accums[i] * momentum - lr * g if nesterov else accums[i])
        history.append(([p.copy() for p in params], [np.copy(a) for a in accums]))
    return history


def _check(optimizer, expected, momentum):
    got = run(optimizer, ("momentum",) if momentum else ())
    for (variables, slots), (want_vars, want_accums) in zip(got, expected, strict=True):
        np.testing.assert_allclose(variables, want_vars, rtol=1e-6, atol=1e-6)
        if momentum:
            np.testing.assert_allclose(slots["momentum"], want_accums, rtol=1e-6, atol=1e-6)


@pytest.mark.follows("test_functionality")
@pytest.mark.parametrize("learning_rate,momentum,nesterov", PRODUCT)
def test_functionality(learning_rate, momentum, nesterov):
    optimizer = SGDIpuOptimizer(
        learning_rate=learning_rate,
        momentum=momentum,
        nesterov=nesterov,
        optimizer_compute_precisions=(tf.float32,),
        momentum_accum_dtype=tf.float32,
    )
    _check(optimizer, _expected(lambda t: learning_rate, momentum, nesterov), momentum)


@pytest.mark.follows("test_functionality_lr_schedule")
@pytest.mark.parametrize("learning_rate,momentum,nesterov", PRODUCT)
def test_functionality_lr_schedule(learning_rate, momentum, nesterov):
    schedule, at = inverse_time_decay(learning_rate)
    optimizer = SGDIpuOptimizer(
        learning_rate=schedule,
        momentum=momentum,
        nesterov=nesterov,
        optimizer_compute_precisions=(tf.float32,),
        momentum_accum_dtype=tf.float32,
    )
    _check(optimizer, _expected(at, momentum, nesterov), momentum)


@pytest.mark.follows("test_keras_mixed_precision_supported")
@pytest.mark.parametrize(
    "policy,accum_dtype,precisions,momentum",
    slow_beyond(
        [
            (p, a, c, m)
            for m in (0.9, 0.0)
            for p, a, c in itertools.product(
                ["mixed_float16", "float16", "float32"],
                [tf.float16, tf.float32, None],
                [(tf.float16,), (tf.float32,)],
            )
        ],
        quick=3,
    ),
)
def test_keras_mixed_precision_supported(tmp_path, policy, accum_dtype, precisions, momentum):
    def make():
        return SGDIpuOptimizer(
            momentum=momentum,
            momentum_accum_dtype=accum_dtype,
            optimizer_compute_precisions=precisions,
        )

    try:
        optimizer = make()
        model = train_simple_model_on_sample(optimizer, policy)
        variable = model.layers[1].trainable_variables[0]
        if momentum:
            assert optimizer.get_slot(variable, "momentum").dtype == (accum_dtype or variable.dtype)
        check_weights_round_trip(model, make, policy, tmp_path)
    finally:
        reset_policy()
