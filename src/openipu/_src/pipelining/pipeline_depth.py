"""How many iterations (mini-batches) a pipeline may run, as the original's compiler checks.

The original's Poplar backend lays a pipeline's stages out as a repeated block of
`overlap_length` iterations, and refuses, when it compiles the program (that is, at its
first run), a `gradient_accumulation_count` the block does not fit
(tensorflow/compiler/plugin/poplar/driver/visitors/pipeline_visitor.cc
`VerifyPipelineArgumentsFixed`, grouped_overlap_pipeline_visitor.cc for the grouped
schedule with I/O tiles):

- the stages, in the order the backend sees them, are the forward stages followed by the
  backward stages of a training pipeline in reverse order, each named by its IPU
  (pipeline_visitor.cc `GetPipelineStageDeviceMapping`; a training pipeline has a
  backward stage for every forward stage, pipeline_fixer.cc `InsertDummyBackwardStages`);
- Grouped: the overlap length is the number of those stages; with I/O tiles the count
  must only be at least the overlap length + 2;
- Interleaved: the number of rotations of the stages' IPUs that put no IPU where the
  unrotated order or an earlier accepted rotation has it
  (pipeline_visitor_utils.h `CircularUnion`);
- Sequential: 1 (any count).

The count must be a multiple of the overlap length and at least that long
(FailedPreconditionError, the original's message). A count given at run time is checked
by the original's device when the pipeline runs (a Poplar abort); it is not checked here.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from openipu._src.integration import run_errors
from openipu._src.pipelining.parallel_stages import IpuMapping
from openipu._src.pipelining.pipeline_options import PipelineSchedule

_WHERE_THE_COUNT_COMES_FROM = (
    "This number might be called `gradient_accumulation_count`, "
    "`gradient_accumulation_steps_per_replica` or `steps_per_execution` depending on the "
    "API used."
)


def backend_stage_ipus(mapping: Sequence[IpuMapping], training: bool) -> list[object]:
    """The IPU of each stage the backend schedules: forward, then backward in reverse."""
    ipus: list[object] = [tuple(ipu) if isinstance(ipu, list) else ipu for ipu in mapping]
    return ipus + ipus[::-1] if training else ipus


def circular_union(ipus: Sequence[object]) -> list[int]:
    """The rotations of `ipus` that overlap neither the unrotated order nor each other."""
    accepted = [0]
    size = len(ipus)

    def rotated(offset: int) -> list[object]:
        return [ipus[(i + offset) % size] for i in range(size)]

    for offset in range(1, size):
        candidate = rotated(offset)
        if all(
            all(a != b for a, b in zip(candidate, rotated(other), strict=True))
            for other in accepted
        ):
            accepted.append(offset)
    return accepted


def overlap_length(schedule: PipelineSchedule, ipus: Sequence[object]) -> int:
    """The number of iterations in the repeated block of `schedule` over the stages' IPUs."""
    if schedule is PipelineSchedule.Grouped:
        return len(ipus)
    if schedule is PipelineSchedule.Interleaved:
        return len(circular_union(ipus))
    return 1


def refusal(
    count: int,
    schedule: PipelineSchedule,
    mapping: Sequence[IpuMapping],
    training: bool,
    io_tiles: bool,
) -> str | None:
    """Why the original's compiler refuses `count` iterations, or None if it accepts them."""
    overlap = overlap_length(schedule, backend_stage_ipus(mapping, training))
    if schedule is PipelineSchedule.Grouped and io_tiles:
        minimum = overlap + 2
        if count < minimum:
            return (
                f"The number of iterations of the pipeline must be at least {minimum}, but it "
                f"is {count}. {_WHERE_THE_COUNT_COMES_FROM}"
            )
        return None
    if count % overlap:
        return (
            f"The number of iterations of the pipeline must be a multiple of {overlap}, but "
            f"it is {count}. {_WHERE_THE_COUNT_COMES_FROM}"
        )
    if count < overlap:
        return (
            f"The number of iterations of the pipeline must be at least {overlap}, but it is "
            f"{count}. {_WHERE_THE_COUNT_COMES_FROM}"
        )
    return None


#: The start of every refusal (the failing check's message is found by it).
_REFUSAL = "The number of iterations of the pipeline must be"


def failing_check(message: str) -> tf.Operation:
    """An operation that fails when the program runs, as the original's compilation does:
    with a FailedPreconditionError giving `message` (`integration/run_errors.py`)."""
    run_errors.install(run_errors.assertion_as(tf.errors.FailedPreconditionError, _REFUSAL))
    return tf.debugging.Assert(tf.constant(False), [tf.constant(message)], name="pipeline_depth")
