"""Random number state of the emulated IPUs.

A real IPU seeds every random operation of a compiled program from one
hardware seed per replica, which `utils.reset_ipu_seed` resets. openipu keeps
one `tf.random.Generator` per (IPU device, replica); compiled regions draw the
seeds of their random operations from it (see `engine.random_ops`), so
resetting the generator makes a program's random numbers repeat.
"""

from __future__ import annotations

import threading

import tensorflow as tf
from tensorflow.python.eager import context

_lock = threading.Lock()
_generators: dict[tuple[int, int], tf.random.Generator] = {}
_seeds: dict[int, tuple[int, bool]] = {}


def generator(device_ordinal: int = 0, replica: int = 0) -> tf.random.Generator:
    """The generator of one replica of an IPU device, created on first use."""
    key = (device_ordinal, replica)
    with _lock:
        gen = _generators.get(key)
        if gen is None:
            with tf.init_scope():
                gen = _new_generator(device_ordinal, replica)
            _generators[key] = gen
        return gen


def reset_ipu_seed(
    seed: int, device_ordinal: int = 0, experimental_identical_replicas: bool = False
) -> None:
    """Makes the random numbers of `device_ordinal` start again from `seed`."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"reset_ipu_seed: seed must be an int, got {seed!r}")
    with _lock, context.eager_mode():
        _seeds[device_ordinal] = (seed, experimental_identical_replicas)
        for (ordinal, replica), gen in _generators.items():
            if ordinal == device_ordinal:
                gen.reset_from_seed(_replica_seed(seed, replica, experimental_identical_replicas))


def reset_all() -> None:
    """Forgets every seed and generator state (a new system configuration)."""
    with _lock, context.eager_mode():
        _seeds.clear()
        for gen in _generators.values():
            gen.reset(tf.random.Generator.from_non_deterministic_state().state)


def _replica_seed(seed: int, replica: int, identical_replicas: bool) -> int:
    # Distinct but reproducible seeds per replica, as the hardware gives.
    return seed if identical_replicas or replica == 0 else hash((seed, replica)) & 0x7FFFFFFF


def _new_generator(device_ordinal: int, replica: int) -> tf.random.Generator:
    if device_ordinal in _seeds:
        seed, identical = _seeds[device_ordinal]
        return tf.random.Generator.from_seed(_replica_seed(seed, replica, identical))
    return tf.random.Generator.from_non_deterministic_state()
