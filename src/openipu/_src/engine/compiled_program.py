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

import collections
import dataclasses
import enum
import threading

from openipu._src.engine.compile_policy import CompileMode
from openipu._src.engine.cost_model import cost_options, tf_workload
from openipu._src.engine.cost_model.estimate import CostEstimate, estimate
from openipu._src.engine.cost_model.workload import Workload
from openipu._src.system import configure


class StepSchedule(enum.Enum):
    """How the steps of one host call run."""

    LOOP = "a device loop, one step after another"
    VECTORIZED = "all steps at once, vectorized over the stacked inputs"
    UNROLLED = "all steps at once, as concurrent copies of the step"
    SHARED_OUT = "steps shared out among the host's cores, one runtime on each"


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
    steps_per_group: int = 1  # steps before each `after_group` (gradient accumulation)
    # What one step does on the chip, for the cost model (None: not read, e.g. onnxruntime).
    workload: Workload | None = dataclasses.field(default=None, compare=False, repr=False)
    # The chip to estimate for (None: the configured system's, when `cost` is called).
    chip: cost_options.CostOptions | None = dataclasses.field(default=None, compare=False)

    def cost(self, options: cost_options.CostOptions | None = None) -> CostEstimate | None:
        """The cost model's estimate for this program on real IPUs (None without a workload).

        `options` default to those of the configured system (`cost_options.from_config`).
        """
        if self.workload is None:
            return None
        if options is None:
            options = self.chip
        if options is None:
            options = cost_options.from_config(
                _configured(), gradient_accumulation_count=self.steps_per_group
            )
        workload = tf_workload.per_replica(self.workload, self.replicas)
        return estimate(workload, options, self.replicas, self.steps_per_call)

    def to_dict(self) -> dict[str, object]:
        """The decisions as plain values (JSON-ready), e.g. to cache or export them."""
        values = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name not in ("workload", "chip")
        }
        values["executor"] = self.executor.value
        values["step_schedule"] = self.step_schedule.name
        return values

    @classmethod
    def from_dict(cls, values: dict[str, object]) -> CompiledProgram:
        """The record `to_dict` gave."""
        fields = dict(values)
        fields["executor"] = CompileMode(fields["executor"])
        fields["step_schedule"] = StepSchedule[str(fields["step_schedule"])]
        return cls(**fields)  # type: ignore[arg-type] # values checked by the dataclass

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
        groups = (
            f", in groups of {self.steps_per_group} step(s)" if self.steps_per_group > 1 else ""
        )
        return (
            f"{self.name}: {executor} on {self.host_device} for /device:IPU:{self.ipu_ordinal}, "
            f"{self.replicas} replica(s) of {self.ipus_per_replica} IPU(s), "
            f"{self.steps_per_call} step(s) per call run as {self.step_schedule.value}{groups}"
        )


def _configured() -> object | None:
    """The configured IPUConfig, if any (the cost model's options come from it)."""
    system = configure.maybe_current_system()
    return None if system is None else system.config


#: The programs compiled most recently in this process, newest last (what reports and the
#: cost model read; bounded, as programs may be compiled again and again).
_RECENT: collections.deque[CompiledProgram] = collections.deque(maxlen=256)
_lock = threading.Lock()


def record(program: CompiledProgram) -> CompiledProgram:
    """Adds `program` to the recently compiled programs; returns it."""
    with _lock:
        _RECENT.append(program)
    return program


def recent(name: str | None = None) -> list[CompiledProgram]:
    """The programs compiled recently (those named `name`), oldest first."""
    with _lock:
        programs = list(_RECENT)
    return [p for p in programs if name is None or p.name == name]
