"""The device enums of PopART's device manager, numbered like the original's."""

from __future__ import annotations

import enum


class DeviceType(enum.IntEnum):
    IpuModel = 0
    Cpu = 1
    Ipu = 2
    OfflineIpu = 3
    Sim = 4


class DeviceConnectionType(enum.IntEnum):
    Always = 0  # attach when the device is acquired
    OnDemand = 1  # attach when a session needs the device (after compiling)
    Never = 2  # never attach: compile only


class SyncPattern(enum.IntEnum):
    Full = 0
    SinglePipeline = 1
    ReplicaAndLadder = 2


class DeviceSelectionCriterion(enum.IntEnum):
    First = 0
    Random = 1
