"""Running a loaded executable: its frozen graph, by the executor its record names."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context

from openipu._src.engine import floating_point_checks
from openipu._src.engine.executable import program_graph, program_state, run_steps
from openipu._src.engine.executable.executable_file import Executable


class LoadedProgram:
    """An executable ready to run: `run(inputs, stacked_streams)` runs one call, that is
    `iterations` steps over the stacked streamed inputs, and returns the stacked outputs."""

    def __init__(self, executable: Executable) -> None:
        if executable.graph is None or executable.program is None:
            raise ValueError(f"The {executable.kind} executable holds no program graph to run")
        self.executable = executable
        self._function = program_graph.load(executable.graph, executable.program.executor)
        # The program's variables (unfrozen ones): start-up inputs the runner holds in
        # variables of its own, which the program reads and updates run after run.
        self._variable_inputs = [int(i) for i in executable.metadata.get("variable_inputs", [])]
        self._variables: dict[int, tf.Variable] = {}
        self._assigned: dict[int, object] = {}  # the start-up value each was last given
        # The program's own state (engine variables), last of the graph's inputs.
        state = executable.sections.get(program_state.SECTION)
        with context.eager_mode():  # the runner's own, whoever loads it
            self._state = [
                tf.Variable(value, trainable=False)
                for value in (program_state.from_bytes(state) if state is not None else [])
            ]
        if executable.metadata.get("floating_point_checks"):
            floating_point_checks.convert_trap_errors()

    def run(
        self,
        inputs: Sequence[np.ndarray | tf.Tensor],
        stacked_streams: Sequence[np.ndarray | tf.Tensor],
        steps: int | None = None,
    ) -> list[tf.Tensor]:
        """`steps`: how many of the loop's steps to run (all when None); the stacked
        outputs of the steps not run are zeros. Only a program that `runs_fewer_steps`."""
        with context.eager_mode():
            # Eagerly whoever calls: a TF1 program's py_function, a thread of its own.
            return self._run(inputs, stacked_streams, steps)

    @property
    def runs_fewer_steps(self) -> bool:
        """Whether a run can run fewer steps than the loop's (a loop that cannot stall)."""
        return bool(self.executable.metadata.get(run_steps.METADATA_KEY))

    def _run(
        self,
        inputs: Sequence[np.ndarray | tf.Tensor],
        stacked_streams: Sequence[np.ndarray | tf.Tensor],
        steps: int | None,
    ) -> list[tf.Tensor]:
        signature = self.executable.signature
        values = [
            tf.convert_to_tensor(v, s.tf_dtype)
            for v, s in zip(
                [*inputs, *stacked_streams],
                [*signature.inputs, *signature.streamed_inputs],
                strict=True,
            )
        ]
        for index in self._variable_inputs:
            values[index] = self._variable(index, inputs[index], values[index]).handle
        values += [variable.handle for variable in self._state]
        if self.runs_fewer_steps:
            values.append(tf.constant(self.executable.iterations if steps is None else steps))
        elif steps is not None and steps != self.executable.iterations:
            raise ValueError(f"The program runs its {self.executable.iterations} steps only")
        try:
            return list(self._function(*values))
        except tf.errors.InvalidArgumentError as error:
            if floating_point_checks.TRAPPED in (error.message or ""):
                # A trap stops the run with the chip's error, an InternalError (as a region's).
                raise tf.errors.InternalError(None, None, error.message) from None
            raise

    def _variable(self, index: int, given: object, value: tf.Tensor) -> tf.Variable:
        """The runner's variable of start-up input `index`: made from its first value,
        assigned again only when a new start-up value is given (a TF1 graph's feed)."""
        variable = self._variables.get(index)
        if variable is None:
            variable = self._variables[index] = tf.Variable(value, trainable=False)
        elif self._assigned[index] is not given:
            variable.assign(value)
        self._assigned[index] = given
        return variable
