"""Running a loaded executable: its frozen graph, by the executor its record names."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from openipu._src.engine.executable import program_graph
from openipu._src.engine.executable.executable_file import Executable


class LoadedProgram:
    """An executable ready to run: `run(inputs, stacked_streams)` runs one call, that is
    `iterations` steps over the stacked streamed inputs, and returns the stacked outputs."""

    def __init__(self, executable: Executable) -> None:
        if executable.graph is None or executable.program is None:
            raise ValueError(f"The {executable.kind} executable holds no program graph to run")
        self.executable = executable
        self._function = program_graph.load(executable.graph, executable.program.executor)

    def run(
        self,
        inputs: Sequence[np.ndarray | tf.Tensor],
        stacked_streams: Sequence[np.ndarray | tf.Tensor],
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
        return list(self._function(*values))
