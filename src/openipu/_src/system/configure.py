"""Configuring the emulated IPU system: `configure_ipu_system` and friends.

The configured system is process-wide state, as on a real host: one
configuration at a time, replaced by the next `configure_ipu_system` call.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
import threading

import tensorflow as tf
from google.protobuf.message import Message

from openipu._src.config import poplar_flags
from openipu._src.config.enums import DeviceConnectionType
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.config.ipu_options import config_from_ipu_options
from openipu._src.config.ipu_options_proto import IpuOptions, IpuOptionsCreator
from openipu._src.integration import tracing_context
from openipu._src.system import host_devices, seeds, topology, xla_cache

logger = logging.getLogger(__name__)

_IPU_DEVICE_RE = re.compile(r"^/?(?:job:[^/]+/)?(?:replica:\d+/)?(?:task:\d+/)?device:IPU:(\d+)$")


@dataclasses.dataclass(frozen=True)
class IPUDevice:
    """One TensorFlow IPU device (`/device:IPU:<ordinal>`) and the IPUs behind it."""

    ordinal: int
    ipus: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"/device:IPU:{self.ordinal}"

    @property
    def num_ipus(self) -> int:
        return len(self.ipus)

    def host_device(self, ipu_in_device: int = 0) -> str:
        """The host device that runs the `ipu_in_device`-th IPU of this device."""
        return host_devices.host_device_for_ipu(self.ipus[ipu_in_device])


@dataclasses.dataclass
class IPUSystem:
    """The configured emulated system: the configuration, its devices and the `IpuOptions`
    protobuf of the configuration (as the devices hold it)."""

    config: IPUConfig
    devices: list[IPUDevice]
    options: Message

    def device(self, ordinal: int) -> IPUDevice:
        if not 0 <= ordinal < len(self.devices):
            # The original's executor (poplar_executor.cc:1668-1672).
            raise tf.errors.InternalError(
                None,
                None,
                f"Device ordinal {ordinal} not in device configuration list. (openipu: the "
                f"configured system has {len(self.devices)} IPU device(s), /device:IPU:0 to "
                f"/device:IPU:{len(self.devices) - 1})",
            )
        return self.devices[ordinal]


_lock = threading.Lock()
_system: IPUSystem | None = None
_configurations = 0  # how many times the system was configured in this process


def configuration_count() -> int:
    """How many times the system was configured (a program traced before is out of date)."""
    return _configurations


def configure_ipu_system(config, device: str = "cpu", reset_configuration: bool = True) -> None:
    """Creates the IPU devices that `config` (an `IPUConfig` or its `IpuOptions` protobuf)
    asks for (see `IPUConfig.auto_select_ipus`)."""
    global _system
    if isinstance(config, IPUConfig):
        # Converting checks the rules that involve several options, as the original's does.
        options = config._create_protobuf()
    elif isinstance(config, IpuOptions):
        # As the original (config.py): the protobuf goes to the backend as it is, which
        # holds it for `get_ipu_config`; the emulated system runs with its IPUConfig.
        _check_creator(config)
        options = copy.deepcopy(config)
        config = config_from_ipu_options(options)
    else:
        raise TypeError(
            f"configure_ipu_system needs an IPUConfig or an IpuOptions protobuf, got "
            f"{type(config).__name__}: create one with `ipu.config.IPUConfig()`"
        )
    # The original's backend reads TF_POPLAR_FLAGS when it starts (tools/flags.cc).
    poplar_flags.parsed()
    poplar_flags.log_help_once()
    devices = _allocate_devices(config)
    host_devices.ensure_logical_devices()
    xla_cache.warn_if_set_late()
    configured = copy.deepcopy(config)
    if poplar_flags.value("use_on_demand"):
        # `--use_on_demand` overrides the connection type the config asks for (the
        # original's utils_use_on_demand_test.py reads it back).
        configured.device_connection.type = DeviceConnectionType.ON_DEMAND
        options.device_connection_type = DeviceConnectionType.ON_DEMAND.value
    global _configurations
    with _lock:
        if (
            _system is not None
            and not reset_configuration
            and len(_system.options.device_config) > 0
            and _system.options != options
        ):
            # The original's devices refuse a second, different configuration unless
            # reset, when the first one selected devices (poplar_executor.cc,
            # `ConfigurePoplarDevice`; reconfigure_ipu_test.py expects the error).
            from tensorflow.python.framework import errors

            raise errors.FailedPreconditionError(
                None,
                None,
                "The IPU system is already configured with a different configuration: "
                "call ipu.config.reset_ipu_configuration() first, or configure_ipu_system "
                "with reset_configuration=True (the default)",
            )
        _system = IPUSystem(config=configured, devices=devices, options=options)
        _configurations += 1
        configured_before = _configurations > 1
    if configured_before:
        # Functions traced for an earlier configuration are traced again (the original
        # compiles its programs again for the device configured now).
        tracing_context.retrace_when_changed(configuration_count)
    seeds.reset_all()
    logger.info("Configured emulated IPU devices: %s", [(d.name, d.ipus) for d in devices])


def _check_creator(options: Message) -> None:
    """The original's backend takes only an `IpuOptions` made from an `IPUConfig`
    (poplar_platform.cc, `ConfigurePoplarDevices`, checks its `creator_id`)."""
    if options.creator_id != IpuOptionsCreator.IPU_UTILS:
        from tensorflow.python.framework import errors

        raise errors.InvalidArgumentError(
            None,
            None,
            "Badly initialized IpuOptions object: did you configure the system using an "
            "instance of tensorflow.python.ipu.config.IPUConfig() ?",
        )


def reset_ipu_configuration() -> None:
    """Forgets the current configuration; IPU work needs a new `configure_ipu_system`."""
    global _system
    with _lock:
        _system = None


def configured_ipu_options() -> list[Message]:
    """The `IpuOptions` protobuf each configured IPU device holds, empty if none is configured.

    What the original's backend returns for its `ipu_get_configuration` op: every device
    holds the options of the whole configuration, with `--use_on_demand` applied
    (poplar_executor.cc, `ConfigurePoplarDevice`).
    """
    system = _system
    if system is None:
        return []
    return [copy.deepcopy(system.options) for _ in system.devices]


def get_ipu_config(session=None) -> list[Message]:
    """The configuration of the IPU system: an `IpuOptions` protobuf per IPU device.

    As in the original (config.py, `get_ipu_config`), a configuration without device
    selections (neither `auto_select_ipus` nor `select_ipus`) counts as none.
    """
    options = configured_ipu_options()
    if not any(len(device.device_config) > 0 for device in options):
        raise RuntimeError("No IPU devices configured.")
    return options


def current_system(purpose: str = "running IPU work") -> IPUSystem:
    """The configured system, or a clear error saying it must be configured first."""
    system = _system
    if system is None:
        # The original's compiler (poplar_compiler.cc:1607-1611).
        raise tf.errors.FailedPreconditionError(
            None,
            None,
            "No device target has been configured. Did you configure the IPU devices by "
            "running `tensorflow.python.ipu.utils.configure_ipu_system(ipu_options)`? "
            f"(openipu: {purpose} needs a configured IPU system: "
            "`cfg = ipu.config.IPUConfig(); cfg.auto_select_ipus = 1; cfg.configure_ipu_system()`)",
        )
    return system


def maybe_current_system() -> IPUSystem | None:
    return _system


def ipu_ordinal(device_name: str) -> int | None:
    """The ordinal N of a '/device:IPU:N' device string, or None for other devices."""
    match = _IPU_DEVICE_RE.match(device_name.strip())
    return int(match.group(1)) if match else None


def _as_list(value) -> list[int]:
    if isinstance(value, int):
        return [value]
    return list(value)


def _allocate_devices(config) -> list[IPUDevice]:
    auto_select = _as_list(config.auto_select_ipus)
    select = _as_list(config.select_ipus)
    total = topology.num_emulated_ipus()
    if select:
        return _devices_from_listing(select, total)
    if not auto_select:
        # Neither option set: one single-IPU device, as a program that forgot
        # to choose would most plausibly want.
        auto_select = [1]
    return _devices_by_size(auto_select, total)


def _devices_by_size(sizes: list[int], total: int) -> list[IPUDevice]:
    requested = sum(sizes)
    free = [True] * total
    devices = []
    for ordinal, size in enumerate(sizes):
        if not topology.is_power_of_two(size) or size > total:
            # The original's executor (poplar_executor.cc:1722-1730): no device of that size.
            raise tf.errors.FailedPreconditionError(
                None,
                None,
                f"Unsupported number of IPUs requested - could not find an IPU device with "
                f"{size} IPUs for the TensorFlow virtual device /device:IPU:{ordinal}. Use "
                "`gc-info -l` to view the available device configurations. (openipu: a "
                "multi-IPU device must have a power-of-two number of IPUs (1, 2, 4, 8, 16, "
                f"...), at most the emulated machine's {total})",
            )
        start = next(
            (s for s in range(0, total, size) if all(free[s : s + size])),
            None,
        )
        if start is None:
            # The original's attach failure (poplar_executor.cc:1478-1553).
            raise tf.errors.InternalError(
                None,
                None,
                f"Could not find an available device for TensorFlow virtual device "
                f"/device:IPU:{ordinal}. This device was expected to have {size} IPU(s). "
                "Common causes of this error include: incorrect configuration of your V-IPU "
                "partition, requesting more IPUs than are available on your system, or IPUs "
                "being used by another program. Use `gc-info -l` and `gc-monitor` to check "
                f"your configuration. (openipu: auto_select_ipus={sizes} asks for {requested} "
                f"IPUs and the emulated machine has {total}; set the environment variable "
                f"{topology.NUM_IPUS_ENV} for a larger one)",
            )
        free[start : start + size] = [False] * size
        devices.append(IPUDevice(ordinal, tuple(range(start, start + size))))
    return devices


def _devices_from_listing(ids: list[int], total: int) -> list[IPUDevice]:
    listing = topology.device_listing(total)
    used: dict[int, int] = {}
    devices = []
    for ordinal, device_id in enumerate(ids):
        if not 0 <= device_id < len(listing):
            raise ValueError(
                f"select_ipus entry {ordinal} is {device_id}: the emulated machine of {total} "
                f"IPUs has device ids 0 to {len(listing) - 1} (see `openipu info`)"
            )
        entry = listing[device_id]
        for ipu in entry.ipus:
            if ipu in used:
                raise ValueError(
                    f"select_ipus={ids}: device ids {ids[used[ipu]]} and {device_id} both "
                    f"contain IPU {ipu}"
                )
            used[ipu] = ordinal
        devices.append(IPUDevice(ordinal, entry.ipus))
    return devices
