"""Runs a function on R replicas of a stock `tf.distribute.MirroredStrategy`.

The replicas sit on the logical CPU devices of the emulated IPUs. One replica
means no strategy at all, where collectives are the identity.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import collectives


@pytest.fixture(scope="session")
def run_on_replicas():
    import tensorflow.python.ipu  # noqa: F401  (splits the host into logical CPU devices)

    strategies: dict[int, tf.distribute.Strategy] = {}

    def run(fn, replicas: int, jit_compile: bool = False) -> list:
        """`fn(replica_index)` on every replica; the per-replica results as numpy."""

        def replica_fn():
            return fn(collectives.replica_index())

        if replicas == 1:
            result = tf.function(replica_fn, jit_compile=jit_compile)()
            return [tf.nest.map_structure(np.asarray, result)]
        if replicas not in strategies:
            strategies[replicas] = tf.distribute.MirroredStrategy(
                [f"/device:CPU:{i}" for i in range(replicas)],
                cross_device_ops=tf.distribute.ReductionToOneDevice(),
            )
        strategy = strategies[replicas]
        result = tf.function(lambda: strategy.run(replica_fn), jit_compile=jit_compile)()
        return [
            tf.nest.map_structure(
                lambda value, i=i: np.asarray(strategy.experimental_local_results(value)[i]),
                result,
            )
            for i in range(replicas)
        ]

    return run
