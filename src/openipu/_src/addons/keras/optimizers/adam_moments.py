"""Adam's first and second moments, which the Adam and LAMB optimizers both update."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.integration import keras_internals


def updated_moments(optimizer, grad, var, dtype: tf.DType) -> tuple[tf.Tensor, tf.Tensor, list]:
    """`(m_hat, v_hat, slot_updates)` after `grad` (already in `dtype`), computed in `dtype`.

    The slots `m` and `v` of `var` are updated (cast to their own dtypes) by the returned
    ops; `m_hat`, `v_hat` are debiased with `t = iterations + 1` when `optimizer.debiasing`.
    """
    beta_1 = tf.identity(keras_internals.optimizer_hyper(optimizer, "beta_1", dtype))
    beta_2 = tf.identity(keras_internals.optimizer_hyper(optimizer, "beta_2", dtype))
    m_slot = optimizer.get_slot(var, "m")
    v_slot = optimizer.get_slot(var, "v")
    m = beta_1 * tf.cast(m_slot, dtype) + (1.0 - beta_1) * grad
    v = beta_2 * tf.cast(v_slot, dtype) + (1.0 - beta_2) * tf.square(grad)
    updates = [
        m_slot.assign(tf.cast(m, m_slot.dtype), read_value=False),
        v_slot.assign(tf.cast(v, v_slot.dtype), read_value=False),
    ]
    if not optimizer.debiasing:
        return m, v, updates
    step = tf.cast(optimizer.iterations + 1, dtype)
    return m / (1.0 - tf.pow(beta_1, step)), v / (1.0 - tf.pow(beta_2, step)), updates
