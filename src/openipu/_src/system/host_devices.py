"""Host devices that stand in for emulated IPUs.

Each emulated IPU is a logical TensorFlow CPU device, so that replicas and
pipeline stages can be placed on distinct devices. Logical devices can only
be created before TensorFlow initialises its runtime, which is why the split
happens as soon as an IPU module is imported. If the runtime was already
initialised, every IPU maps onto the existing CPU devices round-robin.
"""

from __future__ import annotations

import functools
import logging

import tensorflow as tf

from openipu._src.system import topology, xla_cache

logger = logging.getLogger(__name__)


@functools.cache
def ensure_logical_devices() -> int:
    """Splits the host CPU into one logical device per emulated IPU; returns the CPU count."""
    # Before TensorFlow's runtime starts, which reads the XLA cache's flag then.
    xla_cache.configure()
    cpus = tf.config.list_physical_devices("CPU")
    wanted = topology.num_emulated_ipus()
    try:
        if len(tf.config.get_logical_device_configuration(cpus[0]) or []) < wanted:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(wanted)]
            )
    except RuntimeError:
        logger.info(
            "TensorFlow was initialised before openipu: emulated IPUs share %d host device(s)",
            len(tf.config.list_logical_devices("CPU")),
        )
    return len(tf.config.list_logical_devices("CPU"))


def host_device_for_ipu(ipu: int) -> str:
    """The TensorFlow device that runs emulated IPU `ipu`."""
    return f"/device:CPU:{ipu % ensure_logical_devices()}"


def have_distinct_host_devices(ipus: list[int]) -> bool:
    """Whether the given IPUs run on different host devices (needed by replicas)."""
    return len({host_device_for_ipu(i) for i in ipus}) == len(ipus)
