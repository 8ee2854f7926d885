"""Questions about the configured IPU devices: `get_num_of_ipus_in_device`, `running_on_ipu_model`."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.config import poplar_flags
from openipu._src.system import configure


def ipu_device_ordinal(device, caller: str, argument: str = "ipu_device") -> int:
    """The N of an IPU device name '/device:IPU:N', or a clear error for anything else."""
    if not isinstance(device, str):
        raise TypeError(
            f"{caller}: {argument} must be a device name such as '/device:IPU:0', "
            f"got {type(device).__name__}"
        )
    ordinal = configure.ipu_ordinal(device)
    if ordinal is None:
        raise ValueError(
            f"{caller}: {argument}={device!r} is not an IPU device; "
            "use a name such as '/device:IPU:0'"
        )
    return ordinal


def check_cpu_device(device, caller: str, argument: str) -> None:
    """Raises unless `device` names a CPU device ('cpu', '/device:CPU:0', ...)."""
    if not isinstance(device, str):
        raise TypeError(f"{caller}: {argument} must be a CPU device name such as 'cpu'")
    try:
        device_type = tf.DeviceSpec.from_string(device).device_type
    except ValueError:
        device_type = None
    if (device_type or "").upper() != "CPU":
        raise ValueError(
            f"{caller}: {argument}={device!r} is not a CPU device; "
            "use 'cpu' or a name such as '/device:CPU:0'"
        )


def get_num_of_ipus_in_device(ipu_device: str, device: str = "cpu") -> int:
    """The number of physical IPUs behind the TensorFlow IPU device `ipu_device`.

    `device` is the CPU device local to the IPU hardware; every emulated IPU
    is local to the host, so it is only checked.
    """
    caller = "get_num_of_ipus_in_device"
    ordinal = ipu_device_ordinal(ipu_device, caller)
    check_cpu_device(device, caller, "device")
    system = configure.maybe_current_system()
    if system is None:
        # Unconfigured, the original's device N is one IPU (utils_get_config_test.py).
        return 1
    return system.device(ordinal).num_ipus


def running_on_ipu_model() -> bool:
    """Whether XLA targets the IPU model (`--use_ipu_model` in `TF_POPLAR_FLAGS`).

    False means real hardware, which the emulated IPUs stand in for.
    """
    return poplar_flags.use_ipu_model()
