"""A running executable: the engine instance that `embedded_runtime_start` names.

Calls come from any number of threads, each with one streamed element; each caller gets
the results of its own element. Calls are gathered into runs of the executable, as the
original's runtime feeds its engine (kernels/application_runtime/application_runtime.cc):

- A loop that cannot stall (no pipeline) runs step by step there, each step as its
  element arrives, and a call ends with its step: no timeout, no dummy data. Here a run
  takes the calls waiting (at most the loop's `iterations`) and runs only their steps
  (`run_steps.py`); calls arriving meanwhile make the next run. A loop carrying values
  from step to step cannot run part of its steps here (its next run would restart them):
  its run waits as a pipeline's does, its missing elements repeating its last real one
  (not zeros, which the original never gives such a loop: a program dividing by its
  input would trap on them), their results dropped.
- A pipeline, or any loop of a system reserving I/O tiles, can stall (poplar_compiler.cc,
  ModuleExecutionCanStall): while calls are pending, the original waits `timeout`
  microseconds for the next element, then pushes a dummy element of zeros, whose results
  no caller gets. Here a run waits until it has its elements or the first call has waited
  `timeout`, and fills the missing elements with zeros, their results dropped. (The
  original decides this per element, and a Sequential pipeline does not stall there;
  here every pipeline runs all its steps.)
- A step reading several elements (`next()` called several times) runs once all have
  come; outfeed elements go to the calls in the order their elements were taken, as
  the original's queue of result processors: a call may get a later run's.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence

import numpy as np

from openipu._src.engine.executable import run_steps
from openipu._src.engine.executable.executable_file import Executable
from openipu._src.engine.executable.runner import LoadedProgram


class _Call:
    def __init__(self, values: list[np.ndarray]) -> None:
        self.values = values
        self.done = threading.Event()
        self.results: list[np.ndarray] | None = None
        self.error: BaseException | None = None


class RuntimeInstance:
    """One started executable (see the module docstring)."""

    def __init__(
        self, path: str, executable: Executable, inputs: Sequence[np.ndarray], timeout_us: int
    ) -> None:
        self.path = path
        self.executable = executable
        self.timeout_us = timeout_us
        self._inputs = [np.asarray(v) for v in inputs]
        self._program = LoadedProgram(executable)
        self._can_stall = bool(executable.metadata.get(run_steps.CAN_STALL_KEY))
        self._lock = threading.Condition()
        self._waiting: list[_Call] = []
        self._awaiting: collections.deque[_Call] = collections.deque()  # taken, no results yet
        self._reads_per_step = executable.elements_per_run // executable.iterations
        self._running = False  # a thread is gathering and running calls

    def set_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        """The start-up inputs of the runs to come (a TF1 graph feeds them when it runs)."""
        with self._lock:
            self._inputs = [np.asarray(v) for v in inputs]

    def call(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Runs one streamed element (from any thread); returns its outputs."""
        call = _Call([np.asarray(v) for v in values])
        with self._lock:
            self._waiting.append(call)
            self._lock.notify_all()
            lead = not self._running
            if lead:
                self._running = True
        if lead:
            # The first caller gathers a run and runs it, then hands the lead on if calls
            # still wait (no thread of its own: an instance costs nothing while idle).
            self._lead_runs(call)
        call.done.wait()
        if call.error is not None:
            raise call.error
        assert call.results is not None  # set with done, unless error is
        return call.results

    def _lead_runs(self, own: _Call) -> None:
        while True:
            batch = self._gather()
            self._run(batch)
            with self._lock:
                if not self._waiting or own.done.is_set():
                    if self._waiting:
                        # Another waiting caller leads the next run.
                        threading.Thread(
                            target=self._lead_runs, args=(self._waiting[0],), daemon=True
                        ).start()
                    else:
                        self._running = False
                    return

    def _gather(self) -> list[_Call]:
        elements = self.executable.elements_per_run
        deadline = self.timeout_us / 1e6
        reads = self._reads_per_step
        with self._lock:
            if not self._program.runs_fewer_steps:
                self._lock.wait_for(lambda: len(self._waiting) >= elements, timeout=deadline)
            # Whole steps only: a step reading several elements waits for all of them, as
            # the original's (its infeed callback waits for data).
            self._lock.wait_for(lambda: len(self._waiting) >= reads)
            taken = min(elements, len(self._waiting) // reads * reads)
            batch, self._waiting = self._waiting[:taken], self._waiting[taken:]
        return batch

    def _run(self, batch: list[_Call]) -> None:
        signature = self.executable.signature
        elements = self.executable.elements_per_run
        stacked = []
        for index in range(len(signature.streamed_inputs)):
            rows = [call.values[index] for call in batch]
            # The missing elements (see the module docstring): the original's dummy data
            # (zeros) in a pipeline, steps not run or real data otherwise.
            missing = elements - len(batch)
            filler = [np.zeros_like(rows[-1]) if self._can_stall else rows[-1]] * missing
            stacked.append(np.stack(rows + filler))
        with self._lock:
            inputs = self._inputs
        steps = len(batch) // self._reads_per_step
        run_steps_given = steps if self._program.runs_fewer_steps else None
        try:
            # A call gives back the streamed outputs (the run's own outputs come after them).
            run = self._program.run(inputs, stacked, run_steps_given)
            streamed = run[: len(signature.streamed_outputs)]
            outputs = [o.numpy() for o in streamed]
        except BaseException as error:  # noqa: BLE001 - every caller of the run sees its error
            with self._lock:
                for call in [*self._awaiting, *batch]:
                    call.error = error
                    call.done.set()
                self._awaiting.clear()
            return
        # Outfeed elements go to the calls in the order their elements were taken (the
        # original's queue of result processors): one a step of real elements, so with
        # several reads a step, a call may get a later run's.
        with self._lock:
            self._awaiting.extend(batch)
            for position in range(steps):
                call = self._awaiting.popleft()
                call.results = [output[position] for output in outputs]
                call.done.set()
