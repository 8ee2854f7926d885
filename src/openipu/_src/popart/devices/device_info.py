"""`popart.DeviceInfo`: one device a session can run on, and its attach state.

Hardware devices (`DeviceType.Ipu`) are groups of the emulated machine's IPUs, attached
through `ipu_pool`. IPU Model, CPU and simulator devices are not part of the machine: any
number of them can exist and attach. Every kind runs on the host, on the logical TensorFlow
device of its first IPU (`system/host_devices.py`); offline devices only compile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from openipu._src.popart.devices import ipu_pool
from openipu._src.popart.devices.enums import DeviceConnectionType, DeviceType, SyncPattern
from openipu._src.popart.errors import popart_runtime_error
from openipu._src.system import host_devices

IPU_VERSIONS = ("ipu1", "ipu2", "ipu21")
HARDWARE_TILES_PER_IPU = {"ipu1": 1216, "ipu2": 1472, "ipu21": 1472}
WORKER_CONTEXTS = 6
_ATTACH_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class DeviceSpec:
    """What a device is: fixed when it is created."""

    type: DeviceType
    device_id: int
    num_ipus: int
    tiles_per_ipu: int
    ipu_version: str = "ipu2"
    ipus: tuple[int, ...] = ()  # the emulated machine's IPUs, for hardware devices
    sync_pattern: SyncPattern = SyncPattern.Full


class DeviceInfo:
    """A device: its properties, `attach()`/`detach()`, and `with device: ...` (detaches)."""

    def __init__(
        self,
        spec: DeviceSpec,
        connection_type: DeviceConnectionType = DeviceConnectionType.Always,
        attach_timeout_seconds: float = 0.0,
    ) -> None:
        self._spec = spec
        self._connection_type = connection_type
        self._attach_timeout = attach_timeout_seconds
        self._owner = ipu_pool.new_owner()
        self._attached_off_machine = False  # attach state of devices outside the machine

    # -- properties of the original ------------------------------------------------------

    @property
    def type(self) -> DeviceType:
        return self._spec.type

    @property
    def connectionType(self) -> DeviceConnectionType:  # noqa: N802 - the original's names
        return self._connection_type

    @property
    def id(self) -> int:
        return self._spec.device_id

    @property
    def numIpus(self) -> int:  # noqa: N802
        return self._spec.num_ipus

    @property
    def tilesPerIPU(self) -> int:  # noqa: N802
        return self._spec.tiles_per_ipu

    @property
    def tilesPerIpu(self) -> int:  # noqa: N802
        return self._spec.tiles_per_ipu

    @property
    def version(self) -> str:
        return self._spec.ipu_version

    @property
    def ipuVersion(self) -> str:  # noqa: N802
        return self._spec.ipu_version

    @property
    def driverIds(self) -> list[int]:  # noqa: N802
        return list(self._spec.ipus)

    @property
    def numWorkerContexts(self) -> int:  # noqa: N802
        return WORKER_CONTEXTS

    @property
    def isAttached(self) -> bool:  # noqa: N802
        if self._on_machine:
            return ipu_pool.is_attached_by(self._spec.ipus, self._owner)
        return self._attached_off_machine

    # -- attach state --------------------------------------------------------------------

    def attach(self) -> bool:
        """Attaches to the device; False if another device holds one of its IPUs."""
        if self._spec.type is DeviceType.OfflineIpu:
            return False
        if self._on_machine:
            return ipu_pool.try_attach(self._spec.ipus, self._owner)
        self._attached_off_machine = True
        return True

    def detach(self) -> None:
        if self._on_machine:
            ipu_pool.detach(self._spec.ipus, self._owner)
        self._attached_off_machine = False

    def tryAttachUntilTimeout(self) -> bool:  # noqa: N802
        """Tries to attach until the device manager's on-demand attach timeout has passed."""
        deadline = time.monotonic() + self._attach_timeout
        while True:
            if self.attach():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_ATTACH_POLL_SECONDS)

    def __enter__(self) -> DeviceInfo:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.detach()

    def __del__(self) -> None:
        # A device that goes away releases its IPUs, as the original's destructor does.
        try:
            self.detach()
        except Exception:  # noqa: BLE001, S110 - never raise from a finalizer
            pass

    # -- what sessions need --------------------------------------------------------------

    @property
    def spec(self) -> DeviceSpec:
        return self._spec

    @property
    def _on_machine(self) -> bool:
        return self._spec.type is DeviceType.Ipu

    def host_device(self) -> str:
        """The TensorFlow device that runs this device's (first) IPU."""
        if self._spec.ipus:
            return host_devices.host_device_for_ipu(self._spec.ipus[0])
        return "/device:CPU:0"

    def host_device_of(self, ipu_in_device: int) -> str:
        """The TensorFlow device that runs this device's IPU `ipu_in_device` (where sharded
        and pipelined sessions place a virtual graph). Devices outside the machine (IPU Model,
        CPU) have no IPUs of their own: their IPU k runs on the host device of the machine's
        IPU k, a logical CPU device that holds no state of any other session."""
        if self._spec.ipus:
            return host_devices.host_device_for_ipu(self._spec.ipus[ipu_in_device])
        return host_devices.host_device_for_ipu(ipu_in_device)

    def ipu_ordinal(self) -> int:
        """The emulated IPU that seeds random work of this device (its first IPU)."""
        return self._spec.ipus[0] if self._spec.ipus else 0

    def ensure_attached_for(self, purpose: str) -> None:
        """Attaches if the connection type allows; raises if the device cannot run `purpose`."""
        if self._spec.type is DeviceType.OfflineIpu:
            # willow/src/popx/devicex.cpp, loadEngineAndConnectStreams: a runtime_error.
            raise popart_runtime_error(
                f"Offline IPU device is not configured for execution: cannot {purpose}. "
                "Offline devices only compile (compileAndExport); run on an IPU, IPU Model or "
                "CPU device"
            )
        if self._connection_type is DeviceConnectionType.Never:
            raise popart_runtime_error(
                f"Trying to load an engine on an offline device: the device (id {self.id}) has "
                "DeviceConnectionType.Never: it never attaches, "
                f"so it cannot {purpose}"
            )
        if self.isAttached:
            return
        attached = (
            self.tryAttachUntilTimeout()
            if self._connection_type is DeviceConnectionType.OnDemand
            else self.attach()
        )
        if not attached:
            raise popart_runtime_error(
                f"Could not attach to device {self.id} (IPUs {list(self._spec.ipus)}) to "
                f"{purpose}: another device is attached to IPUs "
                f"{sorted(ipu_pool.attached_ipus() & set(self._spec.ipus))}"
            )

    def __repr__(self) -> str:
        return (
            f"Device Type:{self._type_name()} Connection Type:{self._connection_type.name.lower()} "
            f"Id:{self.id} Version:{self.version} NumIPUs:{self.numIpus} "
            f"NumTilesPerIPU:{self.tilesPerIPU} DeviceIds: {{{','.join(map(str, self.driverIds))}}}"
        )

    __str__ = __repr__

    def _type_name(self) -> str:
        return {
            DeviceType.IpuModel: "ipu-model",
            DeviceType.Cpu: "cpu",
            DeviceType.Ipu: "ipu",
            DeviceType.OfflineIpu: "offline-ipu",
            DeviceType.Sim: "sim",
        }[self._spec.type]
