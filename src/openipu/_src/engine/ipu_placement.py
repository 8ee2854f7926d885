"""Placing a program's ops on the emulated IPU (host device) that runs them.

Pipeline stages and shards name an IPU of the program's device; their ops go to that
IPU's host device, while variable ops stay with the region's device (a compiled region
runs on one device, so the variables it uses must live there). One rule for both.
"""

from __future__ import annotations

from collections.abc import Callable

from tensorflow.python.framework import device as tf_device
from tensorflow.python.framework import ops

from openipu._src.engine import device_scope, region
from openipu._src.engine.replicas import lockstep
from openipu._src.system import configure

#: Ops that create or test variables: they stay on the region's device.
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "VarIsInitializedOp"})


def placer(ipu_device: str, variable_device: str | None) -> Callable[[ops.Operation], str]:
    """A device function: `ipu_device` for computation, `variable_device` for variables."""
    variables = variable_device if variable_device is not None else ipu_device

    def place(op: ops.Operation) -> str:
        return variables if op.type in VARIABLE_OPS else ipu_device

    return place


def replica_ipu_host_device(ipu_in_replica: int) -> tuple[str, str] | None:
    """(host device of the replica's `ipu_in_replica`-th IPU, the region's device), or None.

    None outside a compiled region on a configured device, or when the device has fewer
    IPUs (then the caller's build is redone with fewer replicas, or fails there). Replica r
    of R on a device of N IPUs owns IPUs r * N/R to (r + 1) * N/R - 1, as on the IPU.
    """
    current = region.current_region()
    if current is None or current.device is None:
        return None
    system = configure.maybe_current_system()
    ordinal = device_scope.current_ipu_ordinal() or 0
    if system is None or ordinal >= len(system.devices):
        return None
    device = system.device(ordinal)
    per_replica = max(1, device.num_ipus // max(1, lockstep.replica_count()))
    ipu = lockstep.tracing_replica() * per_replica + ipu_in_replica
    if ipu_in_replica >= per_replica or ipu >= device.num_ipus:
        return None
    host = device.host_device(ipu)
    # A program traced once places replica r's copies of these ops on replica r's IPU.
    for name in {host, tf_device.DeviceSpec.from_string(host).to_string()}:
        lockstep.register_device(
            name, lambda r: device.host_device(r * per_replica + ipu_in_replica)
        )
    return host, current.device
