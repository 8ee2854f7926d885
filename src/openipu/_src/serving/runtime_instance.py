"""A running executable: the engine instance that `embedded_runtime_start` names.

Calls come from any number of threads, each with one streamed element. The executable
runs `iterations` elements per run, so calls are gathered into runs: a run starts once
`iterations` calls wait, or once the first waiting call has waited `timeout` microseconds,
its missing elements then filled with copies of its last one, whose results are dropped
(the original's timeout: how long a run waits for the next batch before going on). Each
caller gets the results of its own element.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

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
        self._lock = threading.Condition()
        self._waiting: list[_Call] = []
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
        iterations = self.executable.iterations
        deadline = self.timeout_us / 1e6
        with self._lock:
            self._lock.wait_for(lambda: len(self._waiting) >= iterations, timeout=deadline)
            batch, self._waiting = self._waiting[:iterations], self._waiting[iterations:]
        return batch

    def _run(self, batch: list[_Call]) -> None:
        signature = self.executable.signature
        iterations = self.executable.iterations
        stacked = []
        for index in range(len(signature.streamed_inputs)):
            rows = [call.values[index] for call in batch]
            # The run's missing elements repeat its last one; their results are dropped.
            # The original waits for data where a program cannot stall (application_
            # runtime.cc; a plain loop) and pads a stalled pipeline with zeros; real data
            # here keeps a program's floating-point traps from firing on filler the
            # original never runs.
            filler = [rows[-1]] * (iterations - len(batch))
            stacked.append(np.stack(rows + filler))
        with self._lock:
            inputs = self._inputs
        try:
            # A call gives back the streamed outputs (the run's own outputs come after them).
            streamed = self._program.run(inputs, stacked)[: len(signature.streamed_outputs)]
            outputs = [o.numpy() for o in streamed]
        except BaseException as error:  # noqa: BLE001 - every caller of the run sees its error
            for call in batch:
                call.error = error
                call.done.set()
            return
        for position, call in enumerate(batch):
            call.results = [output[position] for output in outputs]
            call.done.set()
