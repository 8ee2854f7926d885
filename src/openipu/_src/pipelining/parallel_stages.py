"""Parallel pipeline stages: a list of functions as one stage, on a list of IPUs.

The original's `pipeline` takes a computational stage given as a list of functions, with
a list of IPUs as its `device_mapping` entry (ops/pipelining_ops.py `_pipeline_stage`):
every function receives the stage's arguments (the previous stage's outputs), each runs
on its own IPU, and the stage's outputs are all the functions' outputs, flattened into
one list (lists and tuples flattened, a dict kept whole) that the next stage receives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

IpuMapping: TypeAlias = "int | list[int]"
"""One stage's entry of `device_mapping`: an IPU, or one per function of a parallel stage."""

ALL_DEVICES = -1
"""A `device_mapping` entry for a stage spread over all the pipeline's IPUs (the
original's private `pipelining_ops._ALL_DEVICES`); its operations run on the region's
device here."""


class ParallelStage:
    """The functions of one stage, run side by side on their IPUs."""

    def __init__(self, functions: Sequence[Callable[..., Any]]) -> None:
        for function in functions:
            if isinstance(function, list):
                # The original's words (it cannot lower nested lists).
                raise NotImplementedError(
                    "Multiple nested levels of pipeline stages is not supported."
                )
            if not callable(function):
                raise TypeError(f"Every computational stage must be callable, got {function!r}")
        self.functions = list(functions)


def check_mapping(stage: object, entry: object) -> None:
    """A parallel stage needs a list of as many IPUs, as the original's words say."""
    if not isinstance(stage, ParallelStage):
        return
    if not isinstance(entry, list):
        raise ValueError(
            "When the pipeline stage is a list of functions, the device mapping must also "
            "be a list of device IDs."
        )
    if len(entry) != len(stage.functions):
        raise ValueError("Pipeline stage list and device_id list must be the same length.")


def flat_ipus(mapping: Sequence[Any]) -> list[int]:
    """Every IPU `device_mapping` names, parallel stages' lists flattened (a stage on all
    IPUs names none)."""
    return [int(ipu) for ipu in to_flat_list(list(mapping)) if ipu != ALL_DEVICES]


def to_flat_list(values: Any) -> list[Any]:
    """Lists, tuples and ranges flattened to one list (the original's `_to_flat_list`)."""
    if isinstance(values, (list, tuple, range)):
        return [item for value in values for item in to_flat_list(value)]
    return [values]
