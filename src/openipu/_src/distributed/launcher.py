"""Running the instances of one host: start, relay their output, stop them all on a failure.

Each instance is a child process in its own session (so stopping it stops
whatever it started). Its output lines are relayed with the instance's index
in front, like mpirun's `[1,0]<stdout>:`. The first instance to fail stops
the run: the others get SIGTERM, then SIGKILL if they linger, and the run
reports which instance failed and how. A time limit stops a run that hangs.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TextIO

# How long stopped instances get to exit after SIGTERM before SIGKILL.
_GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.05


@dataclasses.dataclass(frozen=True)
class InstanceSpec:
    """One instance to start: its index, command and environment."""

    index: int
    command: Sequence[str]
    environment: dict[str, str]


@dataclasses.dataclass(frozen=True)
class RunResult:
    """How a run ended: its exit code and, if it failed, why."""

    exit_code: int
    message: str | None = None


class _Relay:
    """Copies one stream of one instance, line by line, with the instance's prefix."""

    def __init__(self, stream, prefix: str, out: TextIO | None, lock: threading.Lock) -> None:
        self._thread = threading.Thread(
            target=self._copy, args=(stream, prefix, out, lock), daemon=True
        )
        self._thread.start()

    @staticmethod
    def _copy(stream, prefix: str, out: TextIO | None, lock: threading.Lock) -> None:
        for raw in iter(stream.readline, b""):
            if out is None:
                continue  # drained, so the instance never blocks on a full pipe
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            with lock:
                out.write(f"{prefix}{line}\n")
                out.flush()
        stream.close()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def run_instances(
    instances: Sequence[InstanceSpec],
    *,
    timeout: float | None = None,
    output_from: int | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    on_started: Callable[[], None] | None = None,
) -> RunResult:
    """Starts `instances`, waits for all of them; the first failure stops the others."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    lock = threading.Lock()
    processes: dict[int, subprocess.Popen] = {}
    relays: list[_Relay] = []
    try:
        for spec in instances:
            process = subprocess.Popen(
                list(spec.command),
                env=spec.environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            processes[spec.index] = process
            shown = output_from is None or output_from == spec.index
            relays.append(
                _Relay(
                    process.stdout, f"[1,{spec.index}]<stdout>:", stdout if shown else None, lock
                )
            )
            relays.append(
                _Relay(
                    process.stderr, f"[1,{spec.index}]<stderr>:", stderr if shown else None, lock
                )
            )
        if on_started is not None:
            on_started()
        result = _supervise(processes, timeout)
    except BaseException:
        _stop(processes)
        raise
    for relay in relays:
        relay.join(timeout=2.0)
    return result


def _supervise(processes: dict[int, subprocess.Popen], timeout: float | None) -> RunResult:
    deadline = None if timeout is None else time.monotonic() + timeout
    running = dict(processes)
    while running:
        for index, process in list(running.items()):
            code = process.poll()
            if code is None:
                continue
            del running[index]
            if code != 0:
                stopped = _stop(running)
                return RunResult(_exit_code(code), _failure_message(index, code, stopped))
        if deadline is not None and time.monotonic() > deadline:
            stopped = _stop(running)
            return RunResult(
                124,
                f"poprun: the run exceeded --timeout {timeout:g} s; stopped instance(s) "
                f"{', '.join(map(str, stopped))}",
            )
        time.sleep(_POLL_SECONDS)
    return RunResult(0)


def _stop(running: dict[int, subprocess.Popen]) -> list[int]:
    """Stops the still-running instances (and what they started); returns their indices."""
    alive = {i: p for i, p in running.items() if p.poll() is None}
    for process in alive.values():
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_SECONDS
    for process in alive.values():
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()
    return sorted(alive)


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the instance leads its own session (start_new_session)
    except ProcessLookupError:
        pass


def _exit_code(code: int) -> int:
    # A signal shows as a negative code; shells report it as 128 + the signal number.
    return 128 - code if code < 0 else code


def _failure_message(index: int, code: int, stopped: list[int]) -> str:
    if code < 0:
        try:
            name = f" ({signal.Signals(-code).name})"
        except ValueError:
            name = ""
        how = f"was killed by signal {-code}{name}"
    else:
        how = f"exited with code {code}"
    others = f"; stopped instance(s) {', '.join(map(str, stopped))}" if stopped else ""
    return f"poprun: instance {index} {how}{others}"
