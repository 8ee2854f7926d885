"""`CompiledProgram`: what the engine decided when it compiled a program.

Every decision the engine takes for a program it compiles is kept in one frozen
record: which executor runs it (one XLA computation, a TensorFlow graph, or onnxruntime
for programs held as ONNX models), on which
host device, for which IPU device, with how many replicas of how many IPUs each, how
many steps one host call runs and how they run (a device loop, vectorized, unrolled).
Front ends report from it (PopART's compile facts), and what still stands on the
compiled program (serving, executable caches, the cost model) reads it instead of
asking each front end.
"""

from __future__ import annotations

import dataclasses
import enum

from openipu._src.engine.compile_policy import CompileMode


class StepSchedule(enum.Enum):
    """How the steps of one host call run."""

    LOOP = "a device loop, one step after another"
    VECTORIZED = "all steps at once, vectorized over the stacked inputs"
    UNROLLED = "all steps at once, as concurrent copies of the step"


@dataclasses.dataclass(frozen=True)
class CompiledProgram:
    """The compile decisions of one program (see the module docstring)."""

    name: str
    executor: CompileMode
    host_device: str
    ipu_ordinal: int
    replicas: int
    ipus_per_replica: int
    steps_per_call: int
    step_schedule: StepSchedule

    @property
    def ipus(self) -> int:
        """The IPUs the program occupies: every replica's."""
        return self.replicas * self.ipus_per_replica

    def describe(self) -> str:
        """One line for logs and reports."""
        executor = {
            CompileMode.XLA: "one XLA computation",
            CompileMode.GRAPH: "a TensorFlow graph",
            CompileMode.ONNX_RUNTIME: "onnxruntime's CPU kernels",
        }[self.executor]
        return (
            f"{self.name}: {executor} on {self.host_device} for /device:IPU:{self.ipu_ordinal}, "
            f"{self.replicas} replica(s) of {self.ipus_per_replica} IPU(s), "
            f"{self.steps_per_call} step(s) per call run as {self.step_schedule.value}"
        )
