"""Steps the addons optimizer tests run: a few gradients applied to a few variables, by an
optimizer (eagerly or under XLA) and by a numpy reference with `apply(values, grads, lr)`."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

INITIAL_VALUES = [
    np.array([0.5, -1.0, 2.0], np.float32),
    np.array([[1.0, -0.25], [0.75, 0.1]], np.float32),
]
GRADIENTS = [  # per step, per variable
    [np.array([0.1, -0.2, 0.3]), np.array([[0.5, 0.0], [-0.4, 0.05]])],
    [np.array([-0.3, 0.1, 0.2]), np.array([[0.2, -0.1], [0.3, 0.6]])],
    [np.array([0.05, 0.4, -0.2]), np.array([[-0.5, 0.3], [0.1, -0.2]])],
]


def run_tf(
    optimizer, gradients=GRADIENTS, initial=INITIAL_VALUES, compiled=False, dtype=None, names=None
):
    """The variables after `optimizer` applied each step's gradients (names default var<i>)."""
    names = names or [f"var{i}" for i in range(len(initial))]
    variables = [
        tf.Variable(value if dtype is None else value.astype(dtype), name=name)
        for value, name in zip(initial, names, strict=True)
    ]

    def step(grads):
        optimizer.apply_gradients(zip(grads, variables, strict=True))

    if compiled:
        step = tf.function(step, jit_compile=True)
    for grads in gradients:
        step([tf.constant(g, variables[i].dtype) for i, g in enumerate(grads)])
    return variables


def run_numpy(reference, gradients=GRADIENTS, initial=INITIAL_VALUES, lrs=None):
    """The values after `reference.apply` of each step's gradients (`lrs`: per-step rates)."""
    values = [v.copy() for v in initial]
    for step, grads in enumerate(gradients):
        values = reference.apply(values, grads, None if lrs is None else lrs[step])
    return values


def tiny_data():
    """Eight samples of a linear map from 3 to 2 features."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    y = (x @ np.array([[1.0, -1.0], [0.5, 2.0], [-1.5, 0.3]])).astype(np.float32)
    return x, y
