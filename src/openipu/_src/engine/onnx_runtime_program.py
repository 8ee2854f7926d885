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

import functools
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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
        cores: int = 1,
    ) -> None:
        """`batches_together`: the model's leading (batch) dimension is free, and every
        sample is computed on its own, so a call's batches run as one batch of them all
        (one onnxruntime call instead of one per batch and replica).

        `cores` > 1: the call's batches are shared out among that many onnxruntime
        sessions of one thread each, running at once (as replicas share out a step's
        batches among IPUs); no thread waits on another inside an op, which was measured
        faster than one session's threads sharing each op on the CNN and the transformer
        block of `benchmarks/popart_inference.py` (the session keeps what it measures
        faster).
        """
        import onnxruntime

        if batches_together and cores > 1:
            raise ValueError("OnnxRuntimeProgram: batches_together runs on one session")
        options = onnxruntime.SessionOptions()
        # A model run with its batches together may fail (a shape fixing the batch): its
        # caller falls back without it, so onnxruntime must not print the failure.
        options.log_severity_level = 4 if batches_together else 3
        if cores > 1:
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
        self._sessions = [
            onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
            for _ in range(cores)
        ]
        self._session = self._sessions[0]
        # The caller's thread runs the first share; the pool's threads the others.
        self._pool = (
            ThreadPoolExecutor(cores - 1, thread_name_prefix=f"{name}-onnxruntime")
            if cores > 1
            else None
        )
        self._output_names = list(output_names)
        self.iterations = iterations
        self._replicas = replicas
        self._last_only = outputs == "last"
        self._together = batches_together
        # Per element's input shapes and types: its outputs' (see _run_each).
        self._element_outputs: dict[tuple[object, ...], list[tuple[tuple[int, ...], np.dtype]]] = {}
        if batches_together:  # all steps at once, over the stacked inputs
            schedule = StepSchedule.VECTORIZED
        elif cores > 1:
            schedule = StepSchedule.SHARED_OUT
        else:
            schedule = StepSchedule.LOOP
        self.compiled = CompiledProgram(
            name=name,
            executor=CompileMode.ONNX_RUNTIME,
            host_device=HOST_DEVICE,
            ipu_ordinal=ipu_ordinal,
            replicas=replicas,
            ipus_per_replica=1,
            steps_per_call=iterations,
            step_schedule=schedule,
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
        elements = [step * replicas + replica for step in steps for replica in range(replicas)]
        stacked = self._run_each(arrays, elements)
        lead = [replicas] if replicas > 1 else []
        if not self._last_only:
            lead = [len(steps), *lead]
        return {
            name: value.reshape([*lead, *value.shape[1:]])
            for name, value in zip(self._output_names, stacked, strict=True)
        }

    def bind(
        self, stacked_inputs: Mapping[str, np.ndarray], destinations: Mapping[str, np.ndarray]
    ) -> Callable[[], None] | None:
        """A call on these very arrays that writes each output into its destination (an
        array of the call's stacked output shape), with onnxruntime's bindings made once.

        Each call then only runs the bindings: no feeds to build, no outputs to allocate
        and copy. onnxruntime reads the inputs in place, so values written into them
        between calls are read. The caller keeps the arrays alive and unchanged in shape.
        None where they cannot be bound: outputs of the last step only, arrays that are not
        C-contiguous numeric arrays of the stacked shapes.
        """
        elements = self.iterations * self._replicas
        # Outputs are stacked by step, then replica (when there are several).
        lead = (self.iterations, self._replicas) if self._replicas > 1 else (self.iterations,)
        arrays = [*stacked_inputs.values(), *destinations.values()]
        if (
            self._last_only
            or set(destinations) != set(self._output_names)
            or any(not a.flags.c_contiguous or a.dtype == object for a in arrays)
            or any(a.shape[:1] != (elements,) for a in stacked_inputs.values())
            or any(d.shape[: len(lead)] != lead for d in destinations.values())
        ):
            return None
        outputs = {
            name: dest.reshape(elements, *dest.shape[len(lead) :])
            for name, dest in destinations.items()
        }
        if self._together:  # one binding: every element's samples as one batch
            inputs_per_run = [{n: a.reshape(-1, *a.shape[2:]) for n, a in stacked_inputs.items()}]
            outputs_per_run = [{n: o.reshape(-1, *o.shape[2:]) for n, o in outputs.items()}]
        else:
            inputs_per_run = [{n: a[i] for n, a in stacked_inputs.items()} for i in range(elements)]
            outputs_per_run = [{n: o[i] for n, o in outputs.items()} for i in range(elements)]
        runs = list(zip(inputs_per_run, outputs_per_run, strict=True))
        tasks = []
        for session, share in zip(self._sessions, _shares(runs, len(self._sessions)), strict=True):
            bindings = []
            for inputs, results in share:
                binding = session.io_binding()
                for name, array in inputs.items():
                    binding.bind_cpu_input(name, array)
                for name, result in results.items():
                    binding.bind_output(
                        name, "cpu", 0, result.dtype, result.shape, result.ctypes.data
                    )
                bindings.append(binding)
            if bindings:
                tasks.append(functools.partial(_run_bindings, session, bindings))
        return functools.partial(self._run_at_once, tasks)

    def _run_at_once(self, tasks: Sequence[Callable[[], None]]) -> None:
        """Runs the tasks at once: the first on this thread, the others on the pool's."""
        if len(tasks) == 1 or self._pool is None:
            for task in tasks:
                task()
            return
        futures = [self._pool.submit(task) for task in tasks[1:]]
        errors: list[BaseException] = []
        try:
            tasks[0]()
        except BaseException as error:  # noqa: BLE001 - raised after the others end
            errors.append(error)
        for future in futures:  # every share ends before the call returns or raises
            try:
                future.result()
            except BaseException as error:  # noqa: BLE001
                errors.append(error)
        if errors:
            raise errors[0]

    def _run_each(self, arrays: dict[str, np.ndarray], elements: list[int]) -> list[np.ndarray]:
        """Each element's run, its outputs written in place into one array per output.

        The first run of a call on inputs of new shapes allocates (its outputs' shapes and
        types are then known); the others bind their inputs (views of the stacked arrays)
        and outputs (rows of the result) with onnxruntime's IOBinding, so no batch's output
        is copied again to stack them, and may run at once on several cores.
        """
        key = tuple((name, array.shape[1:], array.dtype.str) for name, array in arrays.items())
        known = self._element_outputs.get(key)
        if known is not None:
            results = [np.empty([len(elements), *shape], dtype) for shape, dtype in known]
            done = 0
        else:
            first = self._session.run(
                self._output_names, {name: array[elements[0]] for name, array in arrays.items()}
            )
            results = [
                np.empty([len(elements), *np.shape(value)], np.asarray(value).dtype)
                for value in first
            ]
            for result, value in zip(results, first, strict=True):
                result[0] = value
            if all(result.dtype != object for result in results):
                self._element_outputs[key] = [(r.shape[1:], r.dtype) for r in results]
            done = 1
        if len(elements) == done:
            return results
        if any(result.dtype == object for result in results) or any(
            not array.flags.c_contiguous or array.dtype == object for array in arrays.values()
        ):
            for row, element in enumerate(elements[done:], done):
                values = self._session.run(
                    self._output_names, {name: array[element] for name, array in arrays.items()}
                )
                for result, value in zip(results, values, strict=True):
                    result[row] = value
            return results
        rows = list(enumerate(elements))[done:]
        tasks = [
            functools.partial(self._run_rows, session, share, arrays, results)
            for session, share in zip(
                self._sessions, _shares(rows, len(self._sessions)), strict=True
            )
            if share
        ]
        self._run_at_once(tasks)
        return results

    def _run_rows(
        self,
        session: Any,
        rows: list[tuple[int, int]],
        arrays: dict[str, np.ndarray],
        results: list[np.ndarray],
    ) -> None:
        """Runs each (row, element): the element's inputs, its outputs into the row."""
        binding = session.io_binding()
        for row, element in rows:
            for name, array in arrays.items():
                binding.bind_cpu_input(name, array[element])
            for name, result in zip(self._output_names, results, strict=True):
                binding.bind_output(
                    name, "cpu", 0, result.dtype, result.shape[1:], result[row].ctypes.data
                )
            session.run_with_iobinding(binding)

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


#: A pause before each candidate's calls in `faster_program` (onnxruntime's threads spin
#: for a few milliseconds after a run).
SETTLE_SECONDS = 0.01


def faster_program(
    candidates: list[Callable[[Mapping[str, object]], object]],
    inputs: Mapping[str, object],
    runs: int = 7,
    *,
    min_seconds: float = 0.5,
    max_runs: int = 30,
    close: float = 0.25,
) -> int:
    """The index of the candidate that runs `inputs` fastest (each already warmed up).

    Rounds alternate between the candidates, so that a busy machine slows them alike; each
    candidate's best time counts. In a round a candidate runs once untimed, then timed:
    onnxruntime's threads spin a while after a run, and would slow the next candidate's
    first run (each runs alone once chosen). While the two best are within `close` of each
    other after `runs` rounds, more rounds (up to `max_runs`, until `min_seconds` have
    passed): on a busy machine a few rounds of fast programs (the CNN of
    `benchmarks/popart_inference.py`: ~3 ms a call) may all be slowed, and a best time that
    missed the quiet moments picked the slower onnxruntime variant. A clear winner (most
    small models) costs no more rounds.
    """
    best = [float("inf")] * len(candidates)
    rounds = 0
    deadline = time.perf_counter() + min_seconds
    while rounds < runs or (
        rounds < max_runs and time.perf_counter() < deadline and _undecided(best, close)
    ):
        rounds += 1
        for index, candidate in enumerate(candidates):
            # The previous candidate's onnxruntime threads spin a while after its last
            # run: they would take the cores of a candidate sharing its batches out.
            time.sleep(SETTLE_SECONDS)
            candidate(inputs)
            for _ in range(2):
                start = time.perf_counter()
                candidate(inputs)
                best[index] = min(best[index], time.perf_counter() - start)
    logger.debug("executor timings (best of %d rounds): %s", rounds, best)
    return int(np.argmin(best))


def _undecided(best: list[float], close: float) -> bool:
    """Whether the two fastest best times are within `close` (a fraction) of each other."""
    if len(best) < 2:
        return False
    first, second = sorted(best)[:2]
    return second <= first * (1 + close)


def _run_bindings(session: Any, bindings: list[Any]) -> None:
    run = session.run_with_iobinding
    for binding in bindings:
        run(binding)


def _shares(items: list[Any], count: int) -> list[list[Any]]:
    """`items` in `count` contiguous shares of nearly equal sizes (some empty if fewer)."""
    return [
        items[index * len(items) // count : (index + 1) * len(items) // count]
        for index in range(count)
    ]


def host_cores() -> int:
    """The cores this process may run on (a program's shares of batches: one per core)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
