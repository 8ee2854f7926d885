"""`ipu_compiler.compile`: build a computation as one program for an emulated IPU."""

from __future__ import annotations

from collections.abc import Callable

from openipu._src.compiler import device_scope
from openipu._src.engine import region
from openipu._src.system import configure


def compile(computation: Callable, inputs=None):  # noqa: A001 - the original's name
    """Builds `computation(*inputs)` as one compiled program on the current IPU device.

    Returns the same structure as `computation`, except that a None output or
    an operation-only output becomes a NoOp, and a single value becomes a
    1-tuple (spec section 21.2).
    """
    ordinal = device_scope.current_ipu_ordinal()
    if ordinal is None:
        raise ValueError(
            "ipu_compiler.compile must be called for an IPU device: build it inside "
            "`with ipu.scopes.ipu_scope('/device:IPU:0'):` (or an IPUStrategy scope)"
        )
    if not callable(computation):
        raise TypeError(f"computation must be callable, got {computation!r}")
    device = configure.current_system("ipu_compiler.compile").device(ordinal)
    return region.compile_region(computation, inputs, device.host_device(), ipu_ordinal=ordinal)
