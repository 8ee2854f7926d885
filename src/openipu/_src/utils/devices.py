"""Questions about the configured IPU devices: `get_num_of_ipus_in_device`, `running_on_ipu_model`."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.config import poplar_flags
from openipu._src.system import configure


def ipu_device_ordinal(device, caller: str, argument: str = "ipu_device") -> int:
    """The N of a device name '/device:IPU:N', as the original's kernels read it.

    The original's operations (IpuGetNumDevices, IpuResetSeed in ipu_kernels.cc) take the
    name as a string attribute and use only its device id, whatever the device type; a
    name without an id is an InvalidArgumentError ("Invalid device name").
    """
    if not isinstance(device, str):
        raise TypeError(
            f"{caller}: {argument} must be a device name such as '/device:IPU:0', "
            f"got {type(device).__name__}"
        )
    ordinal = configure.ipu_ordinal(device)
    if ordinal is not None:
        return ordinal
    try:
        ordinal = tf.DeviceSpec.from_string(device).device_index
    except ValueError:
        ordinal = None
    if ordinal is None:
        raise tf.errors.InvalidArgumentError(
            None,
            None,
            f"Invalid device name {device} ({caller}: {argument} must name a device with an "
            "id, such as '/device:IPU:0')",
        )
    return ordinal


def check_cpu_device(device, caller: str, argument: str) -> None:
    """Raises unless `device` names a CPU device ('cpu', '/device:CPU:0', ...).

    The original places its host operation with `ops.device(device)`: a name TensorFlow
    cannot parse is a ValueError, another device (which has no kernel for it) an
    InvalidArgumentError when the operation runs.
    """
    if not isinstance(device, str):
        raise TypeError(f"{caller}: {argument} must be a CPU device name such as 'cpu'")
    try:
        device_type = tf.DeviceSpec.from_string(device).device_type
    except ValueError:
        raise ValueError(
            f"{caller}: {argument}={device!r} is not a device name; "
            "use 'cpu' or a name such as '/device:CPU:0'"
        ) from None
    if (device_type or "").upper() != "CPU":
        raise tf.errors.InvalidArgumentError(
            None,
            None,
            f"{caller}: {argument}={device!r} is not a CPU device; "
            "use 'cpu' or a name such as '/device:CPU:0'",
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
