"""Programs driven from Python: N steps per call, inputs and outputs as stacked buffers.

Keras `fit`/`evaluate`/`predict` and PopART `session.run` hold their data on
the host and call the device once per N steps (steps per execution, batches
per step). They describe their program as a `ProgramSpec` and the engine compiles
it (`compile_program`) into a `LoopProgram`: one call runs one compiled region
holding a device loop of N iterations, whose infeed is the stacked inputs of the
call and whose outputs come back stacked through an outfeed. It is the same device
loop as `loops.repeat`, not a second engine. The decisions taken when it compiled
are its `compiled` record (`CompiledProgram`).

A program whose steps share no state (`independent_steps`) may instead run its N
steps together: vectorized over the stacked inputs under XLA
(`independent_steps.run_together`), or unrolled into N concurrent copies of the step in a
TensorFlow graph (`independent_steps.run_unrolled`). The same numbers, without a loop of
N small computations run one after another.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.engine import (
    compile_policy,
    compiled_program,
    device_loop,
    independent_steps,
    region,
    replication,
)
from openipu._src.engine.compiled_program import CompiledProgram, StepSchedule
from openipu._src.engine.cost_model import tf_workload
from openipu._src.engine.cost_model.workload import Workload
from openipu._src.engine.outfeed_queue import EngineOutfeedQueue, IPUOutfeedMode
from openipu._src.engine.program_spec import ProgramSpec
from openipu._src.engine.replicas import (  # shared_cond, shared_while: their hooks
    lockstep,
    replicated,
    shared_cond,  # noqa: F401
    shared_while,  # noqa: F401
)
from openipu._src.engine.value_types import Nested
from openipu._src.integration import single_trace_functions
from openipu._src.system import configure

logger = logging.getLogger(__name__)

# Programs the engine decides for start as a TensorFlow graph and move to XLA once they have
# run this many steps (see `LoopProgram._tier`).
TIER_UP_STEPS = 64

# Graph programs unroll at most this many independent steps: each copy of the step is traced
# and kept in the graph, so longer calls keep the loop (small graphs, bounded tracing time).
MAX_UNROLLED_STEPS = 16


def compile_program(spec: ProgramSpec) -> LoopProgram:
    """The engine's program for `spec`; it traces and compiles on its first call (when the
    inputs' shapes are known), and records its decisions in `compiled`."""
    return LoopProgram(spec)


class LoopProgram:
    """A `ProgramSpec` compiled by the engine: each call runs its steps on the device.

    Made by `compile_program(spec)`. The spec's steps run in a device loop (in groups,
    with `after_group` after each, when the spec groups them), every replica on its own
    elements; the outputs gain a replica axis after the step axis. Under a strategy
    spanning processes these are this process's replicas (exchanges reach the others').

    Steps declared independent run together when they can: on one replica, in one group
    (or with no `after_group`), vectorized if compiled by XLA, unrolled if run as a graph
    of at most `MAX_UNROLLED_STEPS` steps (see `_vectorizes`); otherwise, or if the step
    cannot be vectorized, in the loop. `compiled` holds the decisions once a call traced it.
    """

    def __init__(self, spec: ProgramSpec) -> None:
        self.spec = spec
        self.iterations = spec.steps_per_call
        # The executor asked for; set to GRAPH once tracing shows the region needs one.
        self._compile_mode = spec.executor
        # Cleared when vectorizing fails: the steps then run in the loop.
        self._together = spec.independent_steps and (
            spec.after_group is None or spec.group_size == spec.steps_per_call
        )
        self._unrolled = False  # set when the steps run together as a graph (unrolled)
        mode = IPUOutfeedMode.ALL if spec.outputs == "all" else IPUOutfeedMode.LAST
        self._outfeed = EngineOutfeedQueue(mode)
        self._has_outputs = False
        self._workload: Workload | None = None
        self._function = self._new_function()
        self.__name__ = spec.name

    def _new_function(self) -> Any:  # TensorFlow's tf.function is untyped
        """A tf.function of the program that has not traced yet (the next call traces)."""
        return tf.function(self._program, autograph=False, reduce_retracing=True)

    def __call__(self, stacked_inputs: Nested) -> Nested:
        """Runs `iterations` steps over `stacked_inputs`; returns the stacked outputs (or None)."""
        self._tier()
        outputs = self._call_retracing_each_replica_if_needed(stacked_inputs)
        self._steps_run += self.iterations
        return outputs

    # None until the first call decides; then whether the program still runs as a graph
    # until it moves to XLA.
    _tiered: bool | None = None
    _steps_run = 0
    _xla_capable = False  # whether the last trace would get XLA if it asked for nothing

    def _tier(self) -> None:
        """Starts the program as a graph, and moves it to XLA after `TIER_UP_STEPS` steps.

        An XLA compile costs about as much as tracing the program again and pays back only
        over many steps; a graph runs at once. Like a JIT's tiers, a program the engine
        decides for (no executor from its front end, none forced by `OPENIPU_COMPILE`)
        runs as a graph first. The switch depends on the steps run, never on time, so that
        two runs of a program round the same way. Independent steps (PopART inference)
        keep their measured executors. XLA and TensorFlow's kernels draw other numbers from
        one seed: a random op's numbers change at the move (the same in every run).
        """
        if self._tiered is None:
            self._tiered = (
                self._compile_mode is None
                and not self._together
                and compile_policy.forced_mode() is None
            )
            if self._tiered:
                self._compile_mode = compile_policy.CompileMode.GRAPH
                self._function = single_trace_functions.trace_once(self._function)
        elif self._tiered and self._steps_run >= TIER_UP_STEPS:
            self._tiered = False
            if not self._xla_capable:
                # Traced as a graph, it would be one anyway (ops XLA cannot compile, or
                # runs slower): no trace again.
                return
            self._compile_mode = None
            self._last_mode = None
            self._function = self._new_function()

    def _call_retracing_each_replica_if_needed(self, stacked_inputs: Nested) -> Nested:
        if self._trace_each:
            return self._call(stacked_inputs)
        try:
            return self._call(stacked_inputs)
        except Exception as error:  # noqa: BLE001 - autograph re-raises it as its own error
            if not replicated.must_trace_each_replica(error):
                raise
        # The replicas' Python could not be traced once: one trace per replica.
        self._trace_each = True
        self._last_mode = None
        self._function = self._new_function()
        return self._call(stacked_inputs)

    _trace_each = False

    def _call(self, stacked_inputs: Nested) -> Nested:
        # Traced in the plain graph context from the start (region.compile_region): a
        # trace that ends as a graph is the program, not a first look to trace again.
        planned_graph = compile_policy.CompileMode.GRAPH in (
            self._compile_mode,
            compile_policy.forced_mode(),
        )
        if self._together and self._last_mode is None:
            if planned_graph and self.iterations <= MAX_UNROLLED_STEPS:
                # A graph program unrolls its steps (see `_vectorizes`): traced so at once.
                self._together = self._unrolls(stacked_inputs)
            else:
                self._together = self._vectorizes(stacked_inputs)
                if self._unrolled and self.iterations == 1 and self._compile_mode is None:
                    # One step traces to the same ops vectorized or unrolled: the mode that
                    # trace needed holds, and the next trace builds it directly.
                    self._compile_mode = self._last_mode
                if not self._together or self._unrolled:
                    # The traced (vectorized) form is not the one that runs: trace again.
                    self._last_mode = None
                    self._function = self._new_function()
        if self._compile_mode is None and self._last_mode is None:
            # Trace first: if the region must run as a graph, rebuild it outside the XLA
            # context (see region._PlainContext) before it ever runs.
            self._function.get_concrete_function(stacked_inputs)
            if self._last_mode is compile_policy.CompileMode.GRAPH:
                self._compile_mode = compile_policy.CompileMode.GRAPH
                if not planned_graph:
                    self._function = self._new_function()
        return self._function(stacked_inputs)

    def _vectorizes(self, stacked_inputs: Nested) -> bool:
        """Traces the steps together: whether they run so, or in the loop after all.

        Programs compiled by XLA run their steps vectorized. As a TensorFlow graph, the
        vectorizer's reshapes around each op keep oneDNN from fusing a convolution with its
        bias and activation, and batches of a few dozen images keep the kernels' data in
        cache: the loop was faster there than the vectorized form (the CNN of
        `benchmarks/popart_inference.py`: 31k against 21k images/s on one core). Unrolled
        steps keep both, and run concurrently on the host's cores, where the loop's small
        steps barely use the second core: that CNN went from 29k (loop) to about 50k images/s
        on two cores. So graph programs of at most `MAX_UNROLLED_STEPS` steps unroll them.
        """
        try:
            self._function.get_concrete_function(stacked_inputs)
        except Exception as error:  # noqa: BLE001 - any failure to vectorize: use the loop
            # A step that cannot be traced at all fails again, with its own error, in the loop.
            logger.debug("%s: steps run in a loop (vectorizing failed: %s)", self.__name__, error)
            return False
        if self._last_mode is compile_policy.CompileMode.XLA:
            return True
        self._unrolled = self.iterations <= MAX_UNROLLED_STEPS
        return self._unrolled

    def _unrolls(self, stacked_inputs: Nested) -> bool:
        """Traces the steps unrolled: whether they run so, or in the loop after all (a step
        whose copies cannot be traced together, as `_vectorizes`)."""
        self._unrolled = True
        try:
            self._function.get_concrete_function(stacked_inputs)
        except Exception as error:  # noqa: BLE001 - any failure to unroll: use the loop
            logger.debug("%s: steps run in a loop (unrolling failed: %s)", self.__name__, error)
            self._unrolled = False
            self._last_mode = None
            self._function = self._new_function()
            return False
        return True

    @property
    def compiled_mode(self) -> compile_policy.CompileMode | None:
        return self._last_mode

    @property
    def tf_function(self) -> Any:  # TensorFlow's tf.function is untyped
        """The `tf.function` that runs the program (its graph is the program's once called)."""
        return self._function

    @property
    def compiled(self) -> CompiledProgram | None:
        """The compile decisions of the program as last traced; None before the first call."""
        if self._last_mode is None or self._host_device_used is None:
            return None
        if self.runs_steps_together:
            schedule = StepSchedule.UNROLLED if self._unrolled else StepSchedule.VECTORIZED
        else:
            schedule = StepSchedule.LOOP
        return CompiledProgram(
            name=self.__name__,
            executor=self._last_mode,
            host_device=self._host_device_used,
            ipu_ordinal=self.spec.device_ordinal,
            replicas=self.spec.replicas,
            ipus_per_replica=self.spec.ipus_per_replica,
            steps_per_call=self.iterations,
            step_schedule=schedule,
            steps_per_group=self.spec.group_size,
            workload=self._workload,
            chip=self.spec.chip,
        )

    @property
    def unrolls_steps(self) -> bool:
        """Whether the steps that run together are unrolled (a graph) rather than vectorized."""
        return bool(self.runs_steps_together) and self._unrolled

    @property
    def runs_steps_together(self) -> bool | None:
        """Whether a call runs its steps together (vectorized); None before the first call."""
        if self._last_mode is None:
            return None
        return self._together and self._runs_together_now

    _last_mode: compile_policy.CompileMode | None = None
    _runs_together_now = False
    _host_device_used: str | None = None

    def _program(self, stacked_inputs: Nested) -> Nested:
        host_device = self.spec.host_device or (
            configure.current_system("an IPU program")
            .device(self.spec.device_ordinal)
            .host_device()
        )
        self._host_device_used = host_device
        replicas = self.spec.replicas
        stacked_inputs = self._checked_and_indexed(stacked_inputs, replicas)
        self._runs_together_now = self._together and replicas == 1
        if self._runs_together_now:
            return self._steps_together(stacked_inputs, host_device)
        groups = self.iterations // self.spec.group_size
        grouped = self.spec.grouped
        # Step i of replica r reads element i * R + r; steps run in groups.
        shape = [groups, self.spec.group_size] if grouped else [self.iterations]
        replica_axis = len(shape)
        if replicas > 1:
            shape.append(replicas)
        stacked = nest.map_structure(
            lambda t: tf.reshape(t, [*shape, *t.shape[1:]]), stacked_inputs
        )

        def run_step(element: Nested) -> list[tf.Operation]:
            return [tf.group(replication.run_in_replica_context(self._enqueued_step, element))]

        def after_group() -> Nested:
            return replication.run_in_replica_context(lambda: _as_token(self._after_group_call()))

        def replica_program(own: Nested) -> Nested:
            own_input = device_loop.StackedInput(own)
            if grouped:
                return device_loop.repeat_in_groups(
                    groups, self.spec.group_size, run_step, after_group, own_input
                )
            return device_loop.repeat(self.iterations, run_step, [], own_input)

        def build() -> Nested:
            # Each replica's elements, taken before the replicas are built (traced once).
            per_replica = [stacked]
            if replicas > 1:
                per_replica = [
                    nest.map_structure(lambda t, r=r: tf.gather(t, r, axis=replica_axis), stacked)
                    for r in range(replicas)
                ]
            return replicated.first_replica_outputs(
                replica_program,
                replicas,
                replicas * self.spec.ipus_per_replica,
                self.spec.device_ordinal,
                per_replica_inputs=per_replica,
            )

        with lockstep.tracing_each_replica() if self._trace_each else contextlib.nullcontext():
            self._compile(build, host_device)
        if not self._has_outputs:
            return None
        return self._outfeed.dequeue()

    def _checked_and_indexed(self, stacked_inputs: Nested, replicas: int) -> Nested:
        """The inputs, checked to hold every step of every replica (with step indices)."""
        needed = self.iterations * replicas
        for tensor in nest.flatten(stacked_inputs):
            if tensor.shape.rank and tensor.shape[0] != needed:
                raise ValueError(
                    f"The program runs {self.iterations} steps per call on {replicas} "
                    f"replica(s), so its inputs need {needed} elements along the first axis; "
                    f"got shape {tensor.shape}"
                )
        if self.spec.indexed:
            # Step i of every replica has index i, wherever the element is stored.
            indices = tf.repeat(tf.range(self.iterations), replicas)
            stacked_inputs = (stacked_inputs, indices)
        return stacked_inputs

    def _enqueued_step(self, element: Nested) -> tf.Tensor:
        """One step, its outputs sent to the outfeed; a token that runs after it."""
        outputs = self._call_step(element)
        if outputs is None:
            return tf.constant(0)
        self._has_outputs = True
        with tf.control_dependencies([self._outfeed.enqueue(outputs)]):
            return tf.constant(0)

    def _call_step(self, element: Nested) -> Nested:
        if self.spec.indexed:
            element, index = element
            return self.spec.step(element, index)
        return self.spec.step(element)

    def _steps_together(self, stacked_inputs: Nested, host_device: str) -> Nested:
        """All steps of the call at once (one replica): their outputs come straight back."""

        def build() -> Nested:
            run = (
                independent_steps.run_unrolled if self._unrolled else independent_steps.run_together
            )
            outputs = run(self._call_step, stacked_inputs, self.iterations)
            if self.spec.after_group is not None:
                with tf.control_dependencies(nest.flatten(outputs)):
                    done = _as_token(self._after_group_call())
                with tf.control_dependencies([done]):
                    outputs = nest.map_structure(tf.identity, outputs)
            if outputs is not None and self.spec.outputs == "last":
                outputs = nest.map_structure(lambda tensor: tensor[-1], outputs)
            return outputs

        return self._compile(build, host_device)

    def _compile(self, build: Callable[[], Nested], host_device: str) -> Nested:
        return region.compile_region(
            build,
            [],
            host_device,
            ipu_ordinal=self.spec.device_ordinal,
            flat_return_rules=False,
            mode=self._compile_mode,
            on_mode=self._record_mode,
        )

    def _after_group_call(self) -> object:
        """What runs after each group (nothing when the spec groups steps without it)."""
        return None if self.spec.after_group is None else self.spec.after_group()

    def _record_mode(
        self, mode: compile_policy.CompileMode, workload: Workload | None, xla_capable: bool
    ) -> None:
        self._last_mode = mode
        self._xla_capable = xla_capable
        # One step's share, computed once (`compiled` is read after every call).
        self._workload = (
            None if workload is None else tf_workload.per_step(workload, self.iterations)
        )
        compiled = self.compiled
        if compiled is not None:
            compiled_program.record(compiled)
            if self.spec.check_memory:
                region.check_fits(compiled, self.__name__)


def _as_token(result: object) -> tf.Tensor:
    """A tensor that runs after `result` (an operation, a tensor or None)."""
    dependencies = [result] if isinstance(result, (tf.Tensor, tf.Operation)) else []
    with tf.control_dependencies(dependencies):
        return tf.constant(0)
