"""`popart.DeviceManager`: finds, creates and acquires devices on the emulated machine.

The machine has `topology.num_emulated_ipus()` IPUs, listed like `gc-info -l`: first the
single-IPU devices, then the pairs, the fours, ... and one device holding all of them. A
request for more IPUs than the machine has, or for a count that is not a power of two, fails
as it does on a real system.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from openipu._src.popart.devices import ipu_pool
from openipu._src.popart.devices.device_info import (
    HARDWARE_TILES_PER_IPU,
    IPU_VERSIONS,
    DeviceInfo,
    DeviceSpec,
)
from openipu._src.popart.devices.enums import (
    DeviceConnectionType,
    DeviceSelectionCriterion,
    DeviceType,
    SyncPattern,
)
from openipu._src.popart.errors import OptionTypeError, popart_exception, poplar_exception
from openipu._src.popart.options.typed_fields import check_enum, check_int
from openipu._src.popart.pybind_arguments import (
    INT,
    PY_DICT,
    Arg,
    EnumOf,
    Signature,
    bind,
    binding,
)
from openipu._src.system import host_devices, topology

IPU_MODEL_DEFAULT_TILES = 4
_HARDWARE_VERSION = "ipu2"
_MODEL_OPTION_KEYS = ("numIPUs", "tilesPerIPU", "compileIPUCode", "ipuVersion")
# willow/src/popx/devicexmanager.cpp also takes "gatewayMode" (a Poplar target flag).
_OFFLINE_OPTION_KEYS = ("numIPUs", "tilesPerIPU", "ipuVersion", "syncPattern", "gatewayMode")
_SYNC_PATTERN_NAMES = {
    "full": SyncPattern.Full,
    "singlepipeline": SyncPattern.SinglePipeline,
    "replicaandladder": SyncPattern.ReplicaAndLadder,
}


def _int_option(options: Mapping, key: str, default: int, device: str) -> int:
    # The original converts every option value to a string first, so "2" works as well as 2.
    value = options.get(key, default)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise popart_exception(f"{device} option '{key}' must be a positive integer, got {value!r}")
    return value


def _version_option(options: Mapping, device: str) -> str:
    version = options.get("ipuVersion", _HARDWARE_VERSION)
    if version not in IPU_VERSIONS:
        raise popart_exception(
            f"{device} option 'ipuVersion' is {version!r}: one of {', '.join(IPU_VERSIONS)}"
        )
    return version


# The types popart.cpp binds the methods with: another type is pybind11's TypeError.
_MANAGER = "popart_core.DeviceManager"
_DEVICE_INFO = "popart_core.DeviceInfo"
_PATTERN = Arg("pattern", EnumOf(SyncPattern, "popart_core.SyncPattern"), SyncPattern.Full)
_CONNECTION = Arg(
    "connectionType",
    EnumOf(DeviceConnectionType, "popart_core.DeviceConnectionType"),
    DeviceConnectionType.Always,
)
_BY_SIZE = (
    Arg("numIpus", INT, 1),
    Arg("tilesPerIpu", INT, 0),
    _PATTERN,
    _CONNECTION,
    Arg(
        "selectionCriterion",
        EnumOf(DeviceSelectionCriterion, "popart_core.DeviceSelectionCriterion"),
        DeviceSelectionCriterion.First,
    ),
)
_BY_ID = (Arg("id", INT), _PATTERN, _CONNECTION)


def _options(method: str, options: Any, name: str = "arg0") -> Mapping:
    """The options dict (a py::dict in popart.cpp); openipu also takes none as {}."""
    if options is None:
        return {}
    signature = Signature((Arg(name, PY_DICT),), _DEVICE_INFO)
    return bind(method, [signature], (options,), {}, owner=_MANAGER)[1][name]


def _check_option_keys(options: Mapping, allowed: tuple[str, ...], device: str) -> Mapping:
    for key in options:
        if key not in allowed:
            raise popart_exception(
                f"Invalid option '{key}' for a {device} device (valid options: "
                f"{', '.join(allowed)})"
            )
    return options


class DeviceManager:
    """The device manager. `DeviceManager()` is one shared object, as in the original.

    A user's subclass gets one object of its own class, so that its overriding methods are
    the ones called; every manager shares the one machine and attach timeout, as the
    original's Python objects all wrap its one C++ device manager.
    """

    _instances: dict[type, DeviceManager] = {}
    _attach_timeout = 0.0  # seconds; set on DeviceManager itself, shared by subclasses

    def __new__(cls) -> DeviceManager:
        instance = DeviceManager._instances.get(cls)
        if instance is None:
            instance = DeviceManager._instances[cls] = super().__new__(cls)
        return instance

    def __init__(self) -> None:
        # Split the host CPU into one device per IPU now, before TensorFlow starts, if it can.
        host_devices.ensure_logical_devices()

    # -- hardware devices (the emulated machine) -------------------------------------------

    def enumerateDevices(  # noqa: N802 - the original's names
        self,
        pattern: SyncPattern = SyncPattern.Full,
        numIpus: int = 1,  # noqa: N803
        deviceType: DeviceType = DeviceType.Ipu,  # noqa: N803
        connectionType: DeviceConnectionType = DeviceConnectionType.Always,  # noqa: N803
        tilesPerIPU: int = 0,  # noqa: N803
    ) -> list[DeviceInfo]:
        """Every device of the machine with `numIpus` IPUs, attached or not."""
        check_enum(pattern, SyncPattern, "enumerateDevices pattern")
        check_int(numIpus, "enumerateDevices numIpus")
        check_enum(deviceType, DeviceType, "enumerateDevices deviceType")
        check_enum(connectionType, DeviceConnectionType, "enumerateDevices connectionType")
        tiles = self._hardware_tiles(tilesPerIPU)
        if deviceType is not DeviceType.Ipu:
            return []
        return [
            self._hardware_device(entry, tiles, connectionType, pattern)
            for entry in topology.device_listing()
            if entry.num_ipus == numIpus
        ]

    # The public acquire methods share private helpers and never call each other through the
    # instance: user code often wraps or replaces one of them (a subclass or monkeypatch whose
    # acquireAvailableDevice retries with tryAcquireAvailableDevice, or calls the original
    # method), which must not recurse back into itself.

    @binding(_MANAGER, *_BY_SIZE, returns=_DEVICE_INFO)
    def acquireAvailableDevice(  # noqa: N802
        self,
        numIpus: int = 1,  # noqa: N803
        tilesPerIpu: int = 0,  # noqa: N803
        pattern: SyncPattern = SyncPattern.Full,
        connectionType: DeviceConnectionType = DeviceConnectionType.Always,  # noqa: N803
        selectionCriterion: DeviceSelectionCriterion = DeviceSelectionCriterion.First,  # noqa: N803
    ) -> DeviceInfo:
        """A free device with `numIpus` IPUs, attached unless the connection is OnDemand."""
        device = self._try_acquire_available(
            numIpus, tilesPerIpu, pattern, connectionType, selectionCriterion
        )
        if device is None:
            raise popart_exception(self._unavailable_reason(numIpus))
        return device

    @binding(_MANAGER, *_BY_SIZE, returns=_DEVICE_INFO)
    def tryAcquireAvailableDevice(  # noqa: N802
        self,
        numIpus: int = 1,  # noqa: N803
        tilesPerIpu: int = 0,  # noqa: N803
        pattern: SyncPattern = SyncPattern.Full,
        connectionType: DeviceConnectionType = DeviceConnectionType.Always,  # noqa: N803
        selectionCriterion: DeviceSelectionCriterion = DeviceSelectionCriterion.First,  # noqa: N803
    ) -> DeviceInfo | None:
        """As acquireAvailableDevice, but None when no such device is free."""
        return self._try_acquire_available(
            numIpus, tilesPerIpu, pattern, connectionType, selectionCriterion
        )

    @binding(_MANAGER, *_BY_ID, returns=_DEVICE_INFO)
    def acquireDeviceById(  # noqa: N802
        self,
        id: int,  # noqa: A002 - the original's name
        pattern: SyncPattern = SyncPattern.Full,
        connectionType: DeviceConnectionType = DeviceConnectionType.Always,  # noqa: N803
    ) -> DeviceInfo:
        """The device with this `gc-info -l` id, attached unless the connection is OnDemand."""
        device = self._try_acquire_by_id(id, pattern, connectionType)
        if device is not None:
            return device
        listing = topology.device_listing()
        if not 0 <= id < len(listing):
            # Poplar's refusal of an unknown id (device_test.py, test_aquire_device_by_id_1).
            raise poplar_exception(
                f"No such device set id: '{id}' (the emulated machine of "
                f"{topology.num_emulated_ipus()} IPUs has device ids 0 to {len(listing) - 1})"
            )
        busy = sorted(ipu_pool.attached_ipus() & set(listing[id].ipus))
        raise popart_exception(
            f"Failed to acquire device with id '{id}'. Ensure it is available: its IPUs {busy} are "
            "attached to another device"
        )

    @binding(_MANAGER, *_BY_ID, returns=_DEVICE_INFO)
    def tryAcquireDeviceById(  # noqa: N802
        self,
        id: int,  # noqa: A002
        pattern: SyncPattern = SyncPattern.Full,
        connectionType: DeviceConnectionType = DeviceConnectionType.Always,  # noqa: N803
    ) -> DeviceInfo | None:
        """As acquireDeviceById, but None when the device cannot be acquired."""
        return self._try_acquire_by_id(id, pattern, connectionType)

    def setOnDemandAttachTimeout(self, attachTimeout: int) -> None:  # noqa: N802, N803
        """How long (seconds) an OnDemand device keeps trying to attach."""
        seconds = check_int(attachTimeout, "setOnDemandAttachTimeout attachTimeout")
        if seconds < 0:
            # `const unsigned seconds` (willow/include/popart/devicemanager.hpp): pybind11's
            # TypeError for a negative int.
            raise OptionTypeError(f"The attach timeout must be >= 0 seconds, got {seconds}")
        DeviceManager._attach_timeout = float(seconds)

    # -- devices outside the machine -------------------------------------------------------

    @binding(_MANAGER, returns=_DEVICE_INFO)
    def createCpuDevice(self) -> DeviceInfo:  # noqa: N802
        return DeviceInfo(DeviceSpec(DeviceType.Cpu, 0, 1, 1, "cpu"))

    def createIpuModelDevice(self, options: Mapping | None = None) -> DeviceInfo:  # noqa: N802
        options = _options("createIpuModelDevice", options)
        return DeviceInfo(self._model_spec(DeviceType.IpuModel, options, "IPU Model"))

    def createSimDevice(self, options: Mapping | None = None) -> DeviceInfo:  # noqa: N802
        options = _options("createSimDevice", options)
        return DeviceInfo(self._model_spec(DeviceType.Sim, options, "simulator"))

    def createOfflineIPUDevice(self, options: Mapping | None = None) -> DeviceInfo:  # noqa: N802
        options = _options("createOfflineIPUDevice", options, "opts")
        options = _check_option_keys(options, _OFFLINE_OPTION_KEYS, "offline IPU")
        version = _version_option(options, "Offline IPU")
        pattern = options.get("syncPattern", SyncPattern.Full)
        if isinstance(pattern, str):
            pattern = _SYNC_PATTERN_NAMES.get(pattern.lower(), pattern)
        check_enum(pattern, SyncPattern, "Offline IPU option 'syncPattern'")
        spec = DeviceSpec(
            DeviceType.OfflineIpu,
            0,
            _int_option(options, "numIPUs", 1, "Offline IPU"),
            _int_option(options, "tilesPerIPU", HARDWARE_TILES_PER_IPU[version], "Offline IPU"),
            version,
            sync_pattern=pattern,
        )
        return DeviceInfo(spec, DeviceConnectionType.Never)

    def createOfflineIpuFromDeviceInfo(self, deviceInfo: DeviceInfo) -> DeviceInfo:  # noqa: N802, N803
        if not isinstance(deviceInfo, DeviceInfo):
            raise OptionTypeError(
                f"createOfflineIpuFromDeviceInfo needs a DeviceInfo, got {deviceInfo!r}"
            )
        spec = deviceInfo.spec
        offline = DeviceSpec(
            DeviceType.OfflineIpu, spec.device_id, spec.num_ipus, spec.tiles_per_ipu,
            spec.ipu_version, sync_pattern=spec.sync_pattern,
        )  # fmt: skip
        return DeviceInfo(offline, DeviceConnectionType.Never)

    def createOfflineIpuFromSystemString(self, system: str, tiles: int) -> DeviceInfo:  # noqa: N802
        """An offline device for a system ('ipu1', 'ipu2', 'ipu21' or 'POD<n>' of IPU2s)."""
        if not isinstance(system, str):
            raise OptionTypeError(f"The system string must be a str, got {system!r}")
        check_int(tiles, "createOfflineIpuFromSystemString tiles")
        name = system.strip()
        if name in IPU_VERSIONS:
            version, count = name, 1
        elif name.upper().startswith("POD") and name[3:].isdigit():
            version, count = _HARDWARE_VERSION, int(name[3:])
        else:
            raise popart_exception(
                f"Unknown system {system!r}: use 'ipu1', 'ipu2', 'ipu21' or 'POD<n>' (e.g. POD16)"
            )
        if tiles <= 0:
            tiles = HARDWARE_TILES_PER_IPU[version]
        spec = DeviceSpec(DeviceType.OfflineIpu, 0, count, tiles, version)
        return DeviceInfo(spec, DeviceConnectionType.Never)

    # -- helpers -----------------------------------------------------------------------------

    def _hardware_device(
        self,
        entry: topology.DeviceListing,
        tiles: int,
        connection_type: DeviceConnectionType,
        pattern: SyncPattern,
    ) -> DeviceInfo:
        spec = DeviceSpec(
            DeviceType.Ipu, entry.device_id, entry.num_ipus, tiles, _HARDWARE_VERSION,
            entry.ipus, pattern,
        )  # fmt: skip
        return DeviceInfo(spec, connection_type, self._attach_timeout)

    @staticmethod
    def _hardware_tiles(tiles_per_ipu: Any) -> int:
        """0 means any tile count (the whole IPU); fewer tiles make a virtual device."""
        tiles = check_int(tiles_per_ipu, "tilesPerIpu")
        maximum = HARDWARE_TILES_PER_IPU[_HARDWARE_VERSION]
        if not 0 <= tiles <= maximum:
            raise popart_exception(
                f"tilesPerIpu is {tiles}: an {_HARDWARE_VERSION} has {maximum} tiles (0 means all)"
            )
        return tiles or maximum

    @staticmethod
    def _model_spec(device_type: DeviceType, options: Mapping, device: str) -> DeviceSpec:
        options = _check_option_keys(options, _MODEL_OPTION_KEYS, device)
        compile_code = options.get("compileIPUCode", True)
        if not isinstance(compile_code, (bool, str)):
            raise popart_exception(f"{device} option 'compileIPUCode' must be a bool")
        return DeviceSpec(
            device_type,
            0,
            _int_option(options, "numIPUs", 1, device),
            _int_option(options, "tilesPerIPU", IPU_MODEL_DEFAULT_TILES, device),
            _version_option(options, device),
        )

    def _try_acquire_available(
        self,
        num_ipus: int,
        tiles_per_ipu: int,
        pattern: SyncPattern,
        connection_type: DeviceConnectionType,
        selection_criterion: DeviceSelectionCriterion,
    ) -> DeviceInfo | None:
        # As DeviceManager::tryAcquireAvailableDevice (willow/src/devicemanager.cpp): a count
        # that is not a power of two and a Never connection are errors even for the try
        # variant; a count no free device has gives None.
        check_int(num_ipus, "acquireAvailableDevice numIpus")
        tiles = self._hardware_tiles(tiles_per_ipu)
        check_enum(pattern, SyncPattern, "acquireAvailableDevice pattern")
        check_enum(connection_type, DeviceConnectionType, "acquireAvailableDevice connectionType")
        check_enum(
            selection_criterion,
            DeviceSelectionCriterion,
            "acquireAvailableDevice selectionCriterion",
        )
        if num_ipus > 0 and not topology.is_power_of_two(num_ipus):
            raise popart_exception(
                f"You have attempted to acquire {num_ipus} IPUs. The number of IPUs requested "
                "must be a power of two (1, 2, 4, 8, 16, ...)"
            )
        _refuse_never_connection(connection_type)
        free = [
            entry
            for entry in topology.device_listing()
            if entry.num_ipus == num_ipus and ipu_pool.all_free(entry.ipus)
        ]
        if selection_criterion is DeviceSelectionCriterion.Random:
            random.shuffle(free)
        for entry in free:
            device = self._hardware_device(entry, tiles, connection_type, pattern)
            if connection_type is not DeviceConnectionType.Always or device.attach():
                return device
        return None

    def _try_acquire_by_id(
        self, device_id: int, pattern: SyncPattern, connection_type: DeviceConnectionType
    ) -> DeviceInfo | None:
        check_int(device_id, "acquireDeviceById id")
        check_enum(pattern, SyncPattern, "acquireDeviceById pattern")
        check_enum(connection_type, DeviceConnectionType, "acquireDeviceById connectionType")
        _refuse_never_connection(connection_type)
        listing = topology.device_listing()
        if not 0 <= device_id < len(listing):
            return None
        device = self._hardware_device(
            listing[device_id], self._hardware_tiles(0), connection_type, pattern
        )
        if connection_type is DeviceConnectionType.Always and not device.attach():
            return None
        return device

    @staticmethod
    def _unavailable_reason(num_ipus: int) -> str:
        total = topology.num_emulated_ipus()
        if num_ipus > total:
            return (
                f"Failed to acquire device with {num_ipus} IPUs. Ensure that there are "
                f"sufficient IPUs available: the emulated machine has {total} IPUs (set "
                f"{topology.NUM_IPUS_ENV} for a larger one)"
            )
        return (
            f"Failed to acquire device with {num_ipus} IPUs. Ensure that there are sufficient "
            f"IPUs available: no free device of that size on the emulated machine of {total} "
            "IPUs (attached IPUs: "
            f"{sorted(ipu_pool.attached_ipus())})"
        )


def _refuse_never_connection(connection_type: DeviceConnectionType) -> None:
    # willow/src/devicemanager.cpp refuses this in both the acquire and the try variants.
    if connection_type is DeviceConnectionType.Never:
        raise popart_exception(
            "Trying to acquire a hardware device when connectionType is "
            "DeviceConnectionType::Never. For offline compilation, use createOfflineIPUDevice"
        )
