"""Random number state of the emulated IPUs.

A real IPU seeds every random operation of a compiled program from one
hardware seed per replica, which `utils.reset_ipu_seed` resets. openipu keeps
one `SeedStream` per (IPU device, replica): a small variable holding a key
and a counter. Compiled regions take the seeds of their stateless random
operations from it (see `engine.random_ops`), so resetting the stream makes
a program's random numbers repeat.

The state is a plain resource variable, created eagerly and outside any
distribution strategy: it belongs to the emulated device, not to a model.
"""

from __future__ import annotations

import random
import threading

import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.ops import resource_variable_ops

_lock = threading.Lock()
_streams: dict[tuple[int, int], SeedStream] = {}
_seeds: dict[int, tuple[int, bool]] = {}
# Seeds reset while no system was configured, kept by the next configuration.
_pending: dict[int, tuple[int, bool]] = {}


class SeedStream:
    """Seeds for stateless random ops: (key, counter) pairs, the counter advancing per draw."""

    def __init__(self, key: int) -> None:
        with ops.device("/device:CPU:0"):
            self._state = resource_variable_ops.ResourceVariable(
                tf.constant([key, 0], tf.int64), trainable=False, name="ipu_seed_state"
            )

    @property
    def state(self) -> tf.Variable:
        return self._state

    def make_seeds(self, count: int = 1) -> tf.Tensor:
        """`count` fresh seeds, shaped [2, count] like `tf.random.Generator.make_seeds`."""
        before = self._state.assign_add(tf.constant([0, count], tf.int64), read_value=True)
        key = before[0]
        first = before[1] - count
        counters = first + tf.range(count, dtype=tf.int64)
        return tf.stack([tf.fill([count], key), counters])

    def normal(self, shape, mean=0.0, stddev=1.0, dtype=tf.float32) -> tf.Tensor:
        """Normal random numbers drawn from this stream."""
        return tf.random.stateless_normal(shape, self.make_seeds(1)[:, 0], mean, stddev, dtype)

    def uniform(self, shape, minval=0, maxval=None, dtype=tf.float32) -> tf.Tensor:
        """Uniform random numbers drawn from this stream."""
        return tf.random.stateless_uniform(shape, self.make_seeds(1)[:, 0], minval, maxval, dtype)

    def reset(self, key: int) -> None:
        self._state.assign(tf.constant([key, 0], tf.int64))


def generator(device_ordinal: int = 0, replica: int = 0) -> SeedStream:
    """The seed stream of one replica of an IPU device, created on first use."""
    key = (device_ordinal, replica)
    with _lock:
        stream = _streams.get(key)
        if stream is None:
            with context.eager_mode():
                stream = SeedStream(_initial_key(device_ordinal, replica))
            _streams[key] = stream
        return stream


def reset_ipu_seed(
    seed: int, device_ordinal: int = 0, experimental_identical_replicas: bool = False
) -> None:
    """Makes the random numbers of `device_ordinal` start again from `seed`."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"reset_ipu_seed: seed must be an int, got {seed!r}")
    with _lock, context.eager_mode():
        _seeds[device_ordinal] = (seed, experimental_identical_replicas)
        for (ordinal, replica), stream in _streams.items():
            if ordinal == device_ordinal:
                stream.reset(_replica_key(seed, replica, experimental_identical_replicas))


def remember_until_configured(
    seed: int, device_ordinal: int = 0, experimental_identical_replicas: bool = False
) -> None:
    """A seed reset before any system is configured: it applies from now on and survives
    the next configuration (the original's executor exists before configuration and just
    stores the seed: poplar_platform.cc `ResetSeed`)."""
    reset_ipu_seed(seed, device_ordinal, experimental_identical_replicas)
    with _lock:
        _pending[device_ordinal] = (seed, experimental_identical_replicas)


def reset_all() -> None:
    """Forgets every seed: streams start from fresh random keys (a new configuration),
    except the seeds reset while no system was configured."""
    with _lock, context.eager_mode():
        _seeds.clear()
        _seeds.update(_pending)
        _pending.clear()
        for (ordinal, replica), stream in _streams.items():
            stream.reset(_initial_key(ordinal, replica))


def _replica_key(seed: int, replica: int, identical_replicas: bool) -> int:
    # Distinct but reproducible keys per replica, as the hardware gives.
    if identical_replicas or replica == 0:
        return seed
    return hash((seed, replica)) & 0x3FFFFFFFFFFFFFFF


def _initial_key(device_ordinal: int, replica: int) -> int:
    if device_ordinal in _seeds:
        seed, identical = _seeds[device_ordinal]
        return _replica_key(seed, replica, identical)
    return random.getrandbits(62)
