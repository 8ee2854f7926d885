"""Whether this process can afford one more XLA executable.

TensorFlow keeps every XLA executable it compiles until the process ends: its
compilation cache has no eviction (`tensorflow/compiler/jit/device_compilation_cache.h`,
tensorflow/tensorflow#64170, still so in TensorFlow 2.21). On the CPU each executable
holds about six memory mappings of its own (code and data sections of its JIT-linked
object), and Linux ends a process that exceeds `vm.max_map_count` mappings (65530 by
default) with a segmentation fault, in whatever allocation comes next. A process that
compiles about ten thousand distinct programs (a long sweep of models, a test suite)
would crash so.

Before that point the engine stops compiling new programs with XLA: they run as
TensorFlow graphs (same numbers; slower for some programs), and a warning says why,
once. Programs already compiled keep their executables.
"""

from __future__ import annotations

import functools
import logging

logger = logging.getLogger(__name__)

# The share of `vm.max_map_count` past which no new XLA executable is made: what is left
# serves the graphs, tensors and threads of the rest of the process.
_SHARE_OF_LIMIT = 0.8
_MAPS = "/proc/self/maps"
_LIMIT = "/proc/sys/vm/max_map_count"


@functools.cache
def _map_limit() -> int | None:
    try:
        with open(_LIMIT) as file:
            return int(file.read())
    except (OSError, ValueError):
        return None  # not Linux, or not readable: nothing to guard


def _mappings() -> int:
    with open(_MAPS, "rb") as file:
        return file.read().count(b"\n")


_warned = False


def has_room() -> bool:
    """False once this process's memory mappings near the kernel's limit (see the module's
    docstring); logs a warning the first time."""
    global _warned
    limit = _map_limit()
    if limit is None:
        return True
    try:
        used = _mappings()
    except OSError:
        return True
    if used < _SHARE_OF_LIMIT * limit:
        return True
    if not _warned:
        _warned = True
        logger.warning(
            "This process holds %d memory mappings of the %d Linux allows "
            "(vm.max_map_count), most of them TensorFlow's XLA executables, which it never "
            "frees: new programs run as TensorFlow graphs from now on (same results). "
            "Raise vm.max_map_count, or compile fewer distinct programs per process, to keep "
            "XLA.",
            used,
            limit,
        )
    return False
