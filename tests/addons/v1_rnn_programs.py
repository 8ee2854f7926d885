"""What the TF1 Popnn layer tests share: random data, the compiled program, a loss.

Programs are written as for the original: a TF1 graph, the Popnn layer inside
`ipu_compiler.compile` under `ipu_scope`, the stock reference on the CPU.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.python import ipu

TIME, BATCH, FEATURES, UNITS = 5, 3, 2, 4


def uniform(seed: int, shape, scale: float = 0.5) -> np.ndarray:
    return np.random.RandomState(seed).uniform(-scale, scale, shape).astype(np.float32)


def weighted_sum(outputs, states, seed: int = 99) -> tf.Tensor:
    """A loss whose gradient differs per element: sum of values times fixed random weights."""
    terms = []
    for index, value in enumerate([outputs, *states]):
        weights = uniform(seed + index, value.shape.as_list(), scale=1.0)
        terms.append(tf.reduce_sum(tf.cast(value, tf.float32) * weights))
    return tf.add_n(terms)


def on_ipu(program, inputs: list):
    """`program(*inputs)` compiled for the IPU, as the original's tests build it."""
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        return ipu.ipu_compiler.compile(program, inputs)


def run(graph: tf.Graph, fetches, feed_dict: dict, loads: dict | None = None):
    """Initialises the variables, loads `loads` (variable -> value) and runs `fetches`."""
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        for variable, value in (loads or {}).items():
            variable.load(value, session)
        return session.run(fetches, feed_dict)
