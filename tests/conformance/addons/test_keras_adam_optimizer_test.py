"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/optimizers/keras_adam_optimizer_test.py`.

`AdamIpuOptimizer`: three updates of two variables (with and without debiasing,
AMSGrad, a learning-rate schedule) against the original's numpy formulas, the m and v
slots and the beta powers included; under Keras mixed precision policies the slots
have the requested dtypes and weights survive save/load.
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
    adam_numpy,
    beta_powers,
    check_moment_dtypes,
    inverse_time_decay,
    moment_dtype_cases,
    run,
)

from ipu_tensorflow_addons.keras.optimizers import AdamIpuOptimizer

BETA_1, BETA_2, EPSILON = 0.9, 0.999, 1e-7
PRODUCT = list(itertools.product([0.01, 0.001], [True, False]))


def _expected(learning_rate_at, debiasing, amsgrad=False):
    params = [v.copy() for v in VARIABLES]
    m, v = [0.0, 0.0], [0.0, 0.0]
    v_max = [0.0, 0.0] if amsgrad else [None, None]
    history = []
    for t in range(STEPS):
        for i, g in enumerate(GRADIENTS):
            params[i], m[i], v[i], v_max[i] = adam_numpy(
                params[i],
                g,
                t,
                m[i],
                v[i],
                learning_rate_at(t),
                BETA_1,
                BETA_2,
                EPSILON,
                debiasing,
                v_max[i],
            )
        history.append(
            ([p.copy() for p in params], [np.copy(x) for x in m], [np.copy(x) for x in v])
        )
    return history


def _check(optimizer, expected):
    got = run(optimizer, ("m", "v"))
    for (variables, slots), (want, want_m, want_v) in zip(got, expected, strict=True):
        np.testing.assert_allclose(variables, want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(slots["m"], want_m, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(slots["v"], want_v, rtol=1e-6, atol=1e-9)


def _optimizer(learning_rate, debiasing, **kwargs):
    return AdamIpuOptimizer(
        learning_rate=learning_rate,
        beta_1=BETA_1,
        beta_2=BETA_2,
        epsilon=EPSILON,
        debiasing=debiasing,
        optimizer_compute_precisions=(tf.float32,),
        m_dtype=tf.float32,
        v_dtype=tf.float32,
        **kwargs,
    )


@pytest.mark.follows("testFunctionality")
@pytest.mark.parametrize("learning_rate,debiasing", PRODUCT)
def test_functionality(learning_rate, debiasing):
    optimizer = _optimizer(learning_rate, debiasing)
    np.testing.assert_allclose(beta_powers(optimizer), (BETA_1, BETA_2), rtol=1e-6)
    _check(optimizer, _expected(lambda t: learning_rate, debiasing))
    np.testing.assert_allclose(
        beta_powers(optimizer), (BETA_1 ** (STEPS + 1), BETA_2 ** (STEPS + 1)), rtol=1e-6
    )


@pytest.mark.follows("testFunctionalityAmsGrad")
@pytest.mark.parametrize("learning_rate,debiasing", PRODUCT)
def test_functionality_amsgrad(learning_rate, debiasing):
    optimizer = _optimizer(learning_rate, debiasing, amsgrad=True, vhat_dtype=tf.float32)
    _check(optimizer, _expected(lambda t: learning_rate, debiasing, amsgrad=True))


@pytest.mark.follows("testFunctionalityLrSchedule")
@pytest.mark.parametrize("learning_rate,debiasing", PRODUCT)
def test_functionality_lr_schedule(learning_rate, debiasing):
    schedule, at = inverse_time_decay(learning_rate)
    _check(_optimizer(schedule, debiasing), _expected(at, debiasing))


@pytest.mark.follows("testKerasMixedPrecisionSupported")
@pytest.mark.parametrize(
    "policy,m_dtype,v_dtype,precisions,debiasing",
    moment_dtype_cases([(tf.float16,), (tf.float32,)]),
)
def test_keras_mixed_precision_supported(tmp_path, policy, m_dtype, v_dtype, precisions, debiasing):
    def make():
        return AdamIpuOptimizer(
            m_dtype=m_dtype,
            v_dtype=v_dtype,
            optimizer_compute_precisions=precisions,
            debiasing=debiasing,
        )

    check_moment_dtypes(make, policy, m_dtype, v_dtype, tmp_path)
