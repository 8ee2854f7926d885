"""`reset_ipu_seed`: make the random numbers of a program repeat."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.int_like import as_attr_int
from openipu._src.system import configure
from openipu._src.system import seeds as system_seeds
from openipu._src.utils.devices import check_cpu_device, ipu_device_ordinal

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def reset_ipu_seed(
    seed: int,
    device: str = "/device:IPU:0",
    cpu_device: str = "cpu",
    experimental_identical_replicas: bool = False,
) -> None:
    """Resets the seed of the stateful random numbers of an IPU device.

    After the call, these random numbers repeat the sequence that any earlier
    call with the same seed started:

    * the random operations of compiled IPU regions on `device` (unseeded
      dropout, `tf.random.*` inside `ipu_compiler.compile`, loops, Keras on
      the IPU...), which draw from the device's per-replica generators;
    * stock TensorFlow random operations created after the call, eagerly or
      in a function traced after the call, because the global TensorFlow
      seed (`tf.random.set_seed`) is set to `seed` too.

    Random operations of a `tf.function` traced before the call keep their
    own state and continue their sequence. Stochastic rounding, also seeded
    by this call on hardware, does not exist on the emulated IPUs.

    With `experimental_identical_replicas`, every replica of the device gets
    the same seed (and so the same random numbers); otherwise each replica
    gets its own seed derived from `seed`.
    """
    caller = "reset_ipu_seed"
    seed = _check_seed(seed)
    ordinal = ipu_device_ordinal(device, caller, "device")
    check_cpu_device(cpu_device, caller, "cpu_device")
    if not isinstance(experimental_identical_replicas, bool):
        raise TypeError(
            f"{caller}: experimental_identical_replicas must be a bool, got "
            f"{experimental_identical_replicas!r}"
        )
    system = configure.maybe_current_system()
    if system is None:
        # The original accepts it: its executor stores the seed (poplar_platform.cc:175-185),
        # which then seeds the device once it is configured.
        system_seeds.remember_until_configured(seed, ordinal, experimental_identical_replicas)
    else:
        if not 0 <= ordinal < len(system.devices):
            raise tf.errors.InternalError(None, None, f"Invalid ordinal on seed reset: {ordinal}")
        system_seeds.reset_ipu_seed(seed, ordinal, experimental_identical_replicas)
    tf.random.set_seed(seed)


def _check_seed(seed) -> int:
    # The original's IpuResetSeed op takes the seed as an int attribute, which TensorFlow
    # converts with int(): 9.0 and 9.7 seed as 9, True as 1; a str is a TypeError.
    value = as_attr_int(seed, "reset_ipu_seed: seed")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"reset_ipu_seed: seed must fit in 64 bits (signed), got {value}")
    return value
