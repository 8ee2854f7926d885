"""`ProgramSpec`: what a front end asks the engine to compile.

Front ends describe their programs; the engine decides how they run. A Keras execution,
a PopART session's step (inference or training) and any program driven from Python
with N steps per host call is one frozen `ProgramSpec`: the step, how many steps a call
runs, what comes back, the gradient accumulation (steps per weight update and the update
that follows each group), the replicas and the IPUs each one needs, the device, and
what the front end knows about its steps (independent of each other, indexed). The
engine compiles it (`program.compile_program`) into a program whose compile decisions
(executor, host device, replicas, step schedule) are its `CompiledProgram`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from openipu._src.engine.compile_policy import CompileMode
from openipu._src.engine.cost_model.cost_options import CostOptions


@dataclasses.dataclass(frozen=True)
class ProgramSpec:
    """A program of `steps_per_call` steps per host call (see the module docstring).

    - `step(element)` (or `step(element, index)` when `indexed`): one step on one
      replica; it may return outputs (a structure of tensors) or None.
    - `outputs`: "all" (every step's outputs, stacked) or "last" (the final step's).
    - `group_size` and `after_group`: steps run in groups; `after_group()` runs after
      each group (the weight update of gradient accumulation; `group_size` is the
      accumulation count).
    - `replicas` replicas of `ipus_per_replica` IPUs each; step i of replica r reads
      element i * replicas + r of the call's stacked inputs.
    - The device is `/device:IPU:<device_ordinal>` of the configured system, unless
      `host_device` is given (front ends with their own device model: PopART's
      `DeviceManager`); `device_ordinal` then names the IPU whose seeds the program uses.
    - `executor`: XLA or a graph, when the front end has measured which is faster (None:
      the engine decides).
    - `independent_steps`: no step reads what another changes, so the steps of a call may
      run together (vectorized or unrolled) instead of in a loop.
    - `chip`: the chip the cost model checks the program against (None: the configured
      system's; see `CompiledProgram.cost`); `check_memory` False for devices without one
      (PopART's CPU device).
    """

    step: Callable[..., object]
    steps_per_call: int
    outputs: str = "all"
    group_size: int = 1
    after_group: Callable[[], object] | None = None
    replicas: int = 1
    ipus_per_replica: int = 1
    device_ordinal: int = 0
    host_device: str | None = None
    executor: CompileMode | None = None
    indexed: bool = False
    independent_steps: bool = False
    name: str = "ipu_program"
    chip: CostOptions | None = None
    check_memory: bool = True

    def __post_init__(self) -> None:
        if self.outputs not in ("all", "last"):
            raise ValueError(f"outputs must be 'all' or 'last', got {self.outputs!r}")
        if self.steps_per_call % self.group_size:
            raise ValueError(
                f"A program of {self.steps_per_call} steps cannot run in groups of "
                f"{self.group_size} steps"
            )
        if self.executor is CompileMode.ONNX_RUNTIME:
            raise ValueError(
                "A ProgramSpec's step is a Python function: it compiles with XLA or as a "
                "graph (onnxruntime runs programs held as ONNX models)"
            )

    @property
    def grouped(self) -> bool:
        """Whether the steps run in groups with an update after each."""
        return self.group_size > 1 or self.after_group is not None
