"""Replicas for the optimizer tests: a stock MirroredStrategy over the emulated IPUs' CPUs.

`replicas(count)` gives an object whose `scope()` creates variables for the
replicas and whose `function(fn)` builds a tf.function that runs
`fn(replica_index, *args)` on every replica. One replica means no strategy.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import collectives


class Replicas:
    def __init__(self, count: int) -> None:
        import tensorflow.python.ipu  # noqa: F401  (splits the host into logical CPU devices)

        self.count = count
        self.strategy = None
        if count > 1:
            self.strategy = tf.distribute.MirroredStrategy(
                [f"/device:CPU:{i}" for i in range(count)],
                cross_device_ops=tf.distribute.ReductionToOneDevice(),
            )

    def scope(self):
        return contextlib.nullcontext() if self.strategy is None else self.strategy.scope()

    def function(self, fn, jit_compile: bool = False):
        def replica_fn(*args):
            return fn(collectives.replica_index(), *args)

        if self.strategy is None:
            return tf.function(replica_fn, jit_compile=jit_compile)
        return tf.function(
            lambda *args: self.strategy.run(replica_fn, args=args), jit_compile=jit_compile
        )

    def local_values(self, value) -> list[np.ndarray]:
        if self.strategy is None:
            return [np.asarray(value)]
        return [np.asarray(v) for v in self.strategy.experimental_local_results(value)]


@pytest.fixture(scope="session")
def replicas():
    made: dict[int, Replicas] = {}

    def get(count: int) -> Replicas:
        if count not in made:
            made[count] = Replicas(count)
        return made[count]

    return get
