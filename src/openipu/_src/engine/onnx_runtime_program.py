"""Programs run by onnxruntime: the batches of an ONNX model, for front ends that hold one.

A PopART inference session's program is an ONNX model evaluated for N batches per call.
The engine lowers it to TensorFlow (XLA or a graph); for models made of standard ONNX ops
whose meaning onnxruntime shares, onnxruntime's CPU kernels may be faster (the MLP and the
CNN of `benchmarks/popart_inference.py`). The front end decides which models qualify and
gives the model with its weights as constants; `OnnxRuntimeProgram` runs it with the same
inputs and outputs as `LoopProgram` (element i * R + r is step i of replica r; outputs
stacked by step, then replica), and `faster_program` times both on the same inputs and
keeps the faster, as the guide asks: measure, and pick the fastest executor per program.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

import numpy as np

from openipu._src.engine.compile_policy import CompileMode
from openipu._src.engine.compiled_program import CompiledProgram, StepSchedule

logger = logging.getLogger(__name__)

#: Where onnxruntime runs (its CPU provider, on the host's cores).
HOST_DEVICE = "/device:CPU:0"


class OnnxRuntimeProgram:
    """`iterations` steps per call of an ONNX model on every replica, by onnxruntime."""

    def __init__(
        self,
        model: bytes,
        output_names: list[str],
        iterations: int,
        *,
        replicas: int = 1,
        outputs: str = "all",
        ipu_ordinal: int = 0,
        name: str = "ipu_program",
        batches_together: bool = False,
    ) -> None:
        """`batches_together`: the model's leading (batch) dimension is free, and every
        sample is computed on its own, so a call's batches run as one batch of them all
        (one onnxruntime call instead of one per batch and replica)."""
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # A model run with its batches together may fail (a shape fixing the batch): its
        # caller falls back without it, so onnxruntime must not print the failure.
        options.log_severity_level = 4 if batches_together else 3
        self._session = onnxruntime.InferenceSession(
            model, options, providers=["CPUExecutionProvider"]
        )
        self._output_names = list(output_names)
        self.iterations = iterations
        self._replicas = replicas
        self._last_only = outputs == "last"
        self._together = batches_together
        self.compiled = CompiledProgram(
            name=name,
            executor=CompileMode.ONNX_RUNTIME,
            host_device=HOST_DEVICE,
            ipu_ordinal=ipu_ordinal,
            replicas=replicas,
            ipus_per_replica=1,
            steps_per_call=iterations,
            step_schedule=StepSchedule.LOOP,
        )

    @property
    def batches_together(self) -> bool:
        """Whether a call's batches run as one batch (see the constructor)."""
        return self._together

    @property
    def compiled_mode(self) -> CompileMode:
        return CompileMode.ONNX_RUNTIME

    def __call__(self, stacked_inputs: Mapping[str, object]) -> dict[str, np.ndarray] | None:
        """Runs the call's steps; returns each output stacked by step (then replica)."""
        if not self._output_names:
            return None
        arrays = {name: np.asarray(value) for name, value in stacked_inputs.items()}
        replicas = self._replicas
        first = (self.iterations - 1) if self._last_only else 0
        steps = range(first, self.iterations)
        if self._together:
            return self._run_together(arrays, first * replicas, len(steps))
        results: list[list[np.ndarray]] = [[] for _ in self._output_names]
        for step in steps:
            for replica in range(replicas):
                element = step * replicas + replica
                feeds = {name: array[element] for name, array in arrays.items()}
                for collected, value in zip(
                    results, self._session.run(self._output_names, feeds), strict=True
                ):
                    collected.append(value)
        lead = [replicas] if replicas > 1 else []
        if not self._last_only:
            lead = [len(steps), *lead]
        return {
            name: np.stack(values).reshape([*lead, *values[0].shape])
            for name, values in zip(self._output_names, results, strict=True)
        }

    def _run_together(
        self, arrays: dict[str, np.ndarray], first_element: int, steps: int
    ) -> dict[str, np.ndarray]:
        """All elements from `first_element` on as one batch: [elements x batch, ...]."""
        feeds = {
            name: array[first_element:].reshape(-1, *array.shape[2:])
            for name, array in arrays.items()
        }
        replicas = self._replicas
        lead = [replicas] if replicas > 1 else []
        if not self._last_only:
            lead = [steps, *lead]
        outputs = self._session.run(self._output_names, feeds)
        return {
            name: value.reshape([*lead, -1, *value.shape[1:]])
            for name, value in zip(self._output_names, outputs, strict=True)
        }


def faster_program(
    candidates: list[Callable[[Mapping[str, object]], object]],
    inputs: Mapping[str, object],
    runs: int = 3,
) -> int:
    """The index of the candidate that runs `inputs` fastest (each already warmed up).

    Runs alternate between the candidates, so that a busy machine slows them alike; each
    candidate's best time counts.
    """
    best = [float("inf")] * len(candidates)
    for _ in range(runs):
        for index, candidate in enumerate(candidates):
            start = time.perf_counter()
            candidate(inputs)
            best[index] = min(best[index], time.perf_counter() - start)
    logger.debug("executor timings (best of %d): %s", runs, best)
    return int(np.argmin(best))
