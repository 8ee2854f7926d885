"""Runs bound to one PyStepIO's arrays: an inference program on onnxruntime that reads the
stepio's inputs and writes its anchors in place.

A session usually runs the same PyStepIO again and again (a serving loop writes new
values into the same input arrays). After a run has checked the stepio's arrays against
the session's inputs and anchors, the next runs with that stepio need not read, check,
stack and copy them again: `OnnxRuntimeProgram.bind` makes onnxruntime's bindings to the
arrays once. Measured on `benchmarks/popart_inference.py`'s CNN (16 batches per run, on a
busy machine, CPU time of onnxruntime on one thread): reading the inputs and writing the
anchors took 0.4 ms per run after an idle moment, and binding each batch anew 0.6 ms more,
against 15 ms of onnxruntime's kernels.

Only what is exactly a copy may be bound: a PyStepIO (a callback stepio reads per run),
inputs the program reads as views of the stepio's arrays (no cast or replica repeat),
anchors returning every batch (`All`) into arrays of the output's type and size.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Mapping

import numpy as np

from openipu._src.engine.onnx_runtime_program import OnnxRuntimeProgram
from openipu._src.popart.dataflow import AnchorReturnTypeId
from openipu._src.popart.session.anchors import AnchorPlan
from openipu._src.popart.session.stepio import PyStepIO, StepIO


@dataclasses.dataclass(frozen=True)
class BoundRun:
    """A program's run bound to one stepio's arrays."""

    program: OnnxRuntimeProgram
    stepio: weakref.ReferenceType[StepIO]
    call: Callable[[], None]

    def serves(self, program: object, stepio: StepIO) -> bool:
        """Whether it runs `program` on `stepio`'s arrays."""
        return self.program is program and self.stepio() is stepio


def bind(
    program: OnnxRuntimeProgram,
    stacked_inputs: Mapping[str, np.ndarray],
    stepio: StepIO,
    outputs: Mapping[str, object],
    anchors: list[AnchorPlan],
) -> BoundRun | None:
    """`program` bound to `stepio`'s arrays, after a run that read `stacked_inputs` from
    them and gave `outputs`; None where a bound run would not be exactly that run."""
    if type(stepio) is not PyStepIO:
        return None
    sources, targets = stepio.held_arrays()
    if any(
        not isinstance(array, np.ndarray) or not np.may_share_memory(array, sources[name])
        for name, array in stacked_inputs.items()
    ):
        return None  # converted or repeated on reading: a bound run would not see new values
    destinations = {}
    for plan in anchors:
        value = outputs.get(plan.tensor_id)
        target = targets.get(plan.tensor_id)
        if (
            plan.art.id() is not AnchorReturnTypeId.All
            or not isinstance(value, np.ndarray)
            or target is None
            or target.dtype != value.dtype
            or target.size != value.size
            or not target.flags.c_contiguous
        ):
            return None
        destinations[plan.tensor_id] = target.reshape(value.shape)
    call = program.bind(stacked_inputs, destinations)
    if call is None:
        return None
    return BoundRun(program, weakref.ref(stepio), call)
