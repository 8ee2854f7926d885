"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/optimizers/keras_lamb_optimizer_test.py`.

`LAMBIpuOptimizer`: three updates of two variables (weight decay rates 0, 0.01, 0.05,
with and without debiasing, a learning-rate schedule) against the original's numpy
formula (Adam's ratio plus weight decay, scaled by the trust ratio of the norms), the m
and v slots and the beta powers included; slot dtypes under Keras mixed precision and
weights through save/load; the names excluded from weight decay and layer adaptation.
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
    beta_powers,
    check_moment_dtypes,
    inverse_time_decay,
    moment_dtype_cases,
    run,
)

from ipu_tensorflow_addons.keras.optimizers import LAMBIpuOptimizer

BETA_1, BETA_2, EPSILON = 0.9, 0.999, 1e-4


def _lamb_numpy(param, g, t, m, v, lr, weight_decay_rate, debiasing):
    m = BETA_1 * m + (1 - BETA_1) * g
    v = BETA_2 * v + (1 - BETA_2) * g * g
    m_hat, v_hat = (
        (m / (1 - BETA_1 ** (t + 1)), v / (1 - BETA_2 ** (t + 1))) if debiasing else (m, v)
    )
    update = m_hat / (np.sqrt(v_hat) + EPSILON) + weight_decay_rate * param
    w_norm, g_norm = np.linalg.norm(param), np.linalg.norm(update)
    ratio = w_norm / g_norm if w_norm > 0 and g_norm > 0 else 1.0
    return param - ratio * lr * update, m, v


def _expected(learning_rate_at, weight_decay_rate, debiasing):
    params = [v.copy() for v in VARIABLES]
    m, v = [0.0, 0.0], [0.0, 0.0]
    history = []
    for t in range(STEPS):
        for i, g in enumerate(GRADIENTS):
            params[i], m[i], v[i] = _lamb_numpy(
                params[i], g, t, m[i], v[i], learning_rate_at(t), weight_decay_rate, debiasing
            )
        history.append(
            ([p.copy() for p in params], [np.copy(x) for x in m], [np.copy(x) for x in v])
        )
    return history


def _optimizer(learning_rate, weight_decay_rate, debiasing):
    return LAMBIpuOptimizer(
        learning_rate=learning_rate,
        beta_1=BETA_1,
        beta_2=BETA_2,
        epsilon=EPSILON,
        debiasing=debiasing,
        weight_decay_rate=weight_decay_rate,
        optimizer_compute_precisions=(tf.float32, tf.float32),
        m_dtype=tf.float32,
        v_dtype=tf.float32,
    )


def _check(optimizer, expected):
    np.testing.assert_allclose(beta_powers(optimizer), (BETA_1, BETA_2), rtol=1e-6)
    got = run(optimizer, ("m", "v"))
    for (variables, slots), (want, want_m, want_v) in zip(got, expected, strict=True):
        np.testing.assert_allclose(variables, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(slots["m"], want_m, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(slots["v"], want_v, rtol=1e-6, atol=1e-9)


@pytest.mark.follows("test_functionality")
@pytest.mark.parametrize(
    "learning_rate,weight_decay_rate,debiasing",
    list(itertools.product([0.001, 0.01], [0.0, 0.01, 0.05], [True, False])),
)
def test_functionality(learning_rate, weight_decay_rate, debiasing):
    _check(
        _optimizer(learning_rate, weight_decay_rate, debiasing),
        _expected(lambda t: learning_rate, weight_decay_rate, debiasing),
    )


@pytest.mark.follows("test_functionality_lr_schedule")
@pytest.mark.parametrize("debiasing", [True, False])
def test_functionality_lr_schedule(debiasing):
    schedule, at = inverse_time_decay(0.01)
    _check(_optimizer(schedule, 0.01, debiasing), _expected(at, 0.01, debiasing))


@pytest.mark.follows("test_keras_mixed_precision_supported")
@pytest.mark.parametrize(
    "policy,m_dtype,v_dtype,precisions,debiasing",
    moment_dtype_cases([(tf.float16, tf.float16), (tf.float32, tf.float16)]),
)
def test_keras_mixed_precision_supported(tmp_path, policy, m_dtype, v_dtype, precisions, debiasing):
    def make():
        return LAMBIpuOptimizer(
            m_dtype=m_dtype,
            v_dtype=v_dtype,
            weight_decay_rate=0.01,
            optimizer_compute_precisions=precisions,
            debiasing=debiasing,
        )

    check_moment_dtypes(make, policy, m_dtype, v_dtype, tmp_path)


@pytest.mark.follows("test_exclude_weight_decay")
def test_exclude_weight_decay():
    optimizer = LAMBIpuOptimizer(
        learning_rate=0.01, weight_decay_rate=0.01, exclude_from_weight_decay=["var1"]
    )
    assert optimizer._do_use_weight_decay("var0")
    assert not optimizer._do_use_weight_decay("var1")
    assert not optimizer._do_use_weight_decay("var1_weight")


@pytest.mark.follows("test_exclude_layer_adaptation")
def test_exclude_layer_adaptation():
    optimizer = LAMBIpuOptimizer(
        learning_rate=0.01, weight_decay_rate=0.01, exclude_from_layer_adaptation=["var1"]
    )
    assert optimizer._do_layer_adaptation("var0")
    assert not optimizer._do_layer_adaptation("var1")
    assert not optimizer._do_layer_adaptation("var1_weight")
