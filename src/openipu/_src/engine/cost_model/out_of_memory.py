"""Out of memory as on the hardware: a program that does not fit fails to compile.

The original turns Poplar's `graph_memory_allocation_error` into an InternalError
whose message starts "[Poplar][Compile engine] graph_memory_allocation_error: "
(tensorflow/compiler/plugin/poplar/driver/tools/poplar_util.cc,
PoplarExceptionToTensorflowStatus); PopART raises OutOfMemoryException from
prepareDevice, whose summary report lists the memory. Unless asked to compile anyway
(`debug.allowOutOfMemory`, or compiler reports on, in POPLAR_ENGINE_OPTIONS).
"""

from __future__ import annotations

import logging

from tensorflow.python.framework import errors

from openipu._src.engine.cost_model.estimate import CostEstimate

logger = logging.getLogger(__name__)

PREFIX = "[Poplar][Compile engine] graph_memory_allocation_error: "


class OutOfMemoryError(errors.InternalError):  # type: ignore[misc] # TF is untyped
    """A compiled program that would not fit in the IPUs' memory.

    Its constructor is InternalError's, so that autograph re-raises it as itself (with
    the user's code named) when it happens while a tf.function is traced; `estimate` is
    set where it is raised.
    """

    estimate: CostEstimate | None = None


def message(estimate: CostEstimate, program: str) -> str:
    worst = max(estimate.memory, key=lambda ipu: ipu.largest_tile[1])
    tile, used = worst.largest_tile
    largest = ", ".join(
        f"{name} ({kind}, {size} bytes)" for name, kind, _, size in estimate.largest_tensors(5)
    )
    return (
        f"{PREFIX}Out of memory on tile {tile} of IPU {worst.index} compiling {program}: "
        f"{used} bytes used but tiles only have {estimate.chip.bytes_per_tile} bytes of memory "
        f"({estimate.chip.version}; {worst.total_bytes} of {worst.capacity_bytes} bytes in "
        f"all). Largest: {largest}. Reduce the batch size or the model, pipeline or shard it "
        "over more IPUs, or set debug.allowOutOfMemory in POPLAR_ENGINE_OPTIONS to compile "
        "anyway."
    )


def check(estimate: CostEstimate, program: str) -> None:
    """Raises OutOfMemoryError when the program does not fit (unless allowed)."""
    if estimate.fits:
        return
    text = message(estimate, program)
    if estimate.options.allow_out_of_memory:
        logger.warning("%s (compiling anyway, as debug.allowOutOfMemory asks)", text)
        return
    error = OutOfMemoryError(None, None, text)
    error.estimate = estimate
    raise error
