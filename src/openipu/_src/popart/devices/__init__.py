"""PopART's device model on the emulated machine: DeviceManager, DeviceInfo and their enums."""

from openipu._src.popart.devices.device_info import DeviceInfo
from openipu._src.popart.devices.device_manager import DeviceManager
from openipu._src.popart.devices.enums import (
    DeviceConnectionType,
    DeviceSelectionCriterion,
    DeviceType,
    SyncPattern,
)

__all__ = [
    "DeviceConnectionType",
    "DeviceInfo",
    "DeviceManager",
    "DeviceSelectionCriterion",
    "DeviceType",
    "SyncPattern",
]
