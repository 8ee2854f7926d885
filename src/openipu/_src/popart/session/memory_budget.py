"""Whether a session's streamed tensors fit in memory, checked before `prepareDevice` allocates.

An emulated IPU keeps its tensors in host memory, so that is the device memory a session can
use. A model that declares a huge input or output (a dimension of 2**40) would otherwise make
prepareDevice try to allocate it; instead it raises `popart.OutOfMemoryException`, as the
original does when a graph does not fit (`prepareDevice` documents that exception), naming
the tensor.
"""

from __future__ import annotations

import math
import os

import numpy as np

from openipu._src.popart.errors import OutOfMemoryException
from openipu._src.popart.session.anchors import AnchorPlan
from openipu._src.popart.session.stepio import InputPlan


def host_memory_bytes() -> int:
    """The machine's physical memory (the emulated devices' memory)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):  # not on POSIX: no limit known
        return 1 << 62


def check_fits(inputs: list[InputPlan], anchors: list[AnchorPlan], available: int) -> None:
    """Raises OutOfMemoryException when the step's inputs and anchors exceed `available`."""
    sizes = {
        f"input '{plan.tensor_id}'": _bytes(plan.program_shape, plan.signature.numpy_dtype)
        for plan in inputs
    }
    sizes.update({f"anchor '{plan.tensor_id}'": _bytes(plan.shape, plan.dtype) for plan in anchors})
    total = sum(sizes.values())
    if total <= available:
        return
    largest = max(sizes, key=sizes.__getitem__)
    raise OutOfMemoryException(
        f"Out of memory: the session's streamed tensors need {total} bytes, more than the "
        f"{available} bytes of the emulated device (the machine's memory); the largest is "
        f"{largest} ({sizes[largest]} bytes)"
    )


def _bytes(shape: list[int] | tuple[int, ...], dtype: np.dtype) -> int:
    itemsize = np.dtype(dtype).itemsize if np.dtype(dtype) != np.dtype(object) else 8
    return math.prod(int(dim) for dim in shape) * itemsize
