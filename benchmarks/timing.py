"""Timing shared by the benchmarks: the best of several runs, after a warm-up run.

`best_rates` times several programs in turns, so that a machine shared with other
work slows them alike rather than whichever happened to run at a busy moment. Before each
timed call it pauses briefly: runtimes' worker threads keep spinning for a while after a
call returns (onnxruntime's by default), and the program timed next would otherwise share
the cores with them (measured: a transformer session run right after an onnxruntime run
took 39 ms, after a pause 26 ms, while onnxruntime's own time did not change).
"""

from __future__ import annotations

import time
from collections.abc import Callable


def best_rate(run: Callable[[], object], units: int, repeats: int) -> float:
    """`units` per second of the fastest of `repeats` calls of `run` (after one to warm up)."""
    run()  # trace, compile, warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return units / best


# Long enough for spinning worker threads to go to sleep (onnxruntime's spin for a few ms).
SETTLE_SECONDS = 0.05


def best_rates(runs: dict[str, Callable[[], object]], units: int, repeats: int) -> dict[str, float]:
    """`best_rate` of each of `runs`, timed in turns (each already warmed up, the order
    reversed every other round), each call after a pause that lets the previous call's
    worker threads go idle."""
    best = dict.fromkeys(runs, float("inf"))
    order = list(runs.items())
    for round_index in range(repeats):
        # Each program goes first in half the rounds: none always follows the same other one.
        for name, run in order if round_index % 2 == 0 else order[::-1]:
            time.sleep(SETTLE_SECONDS)
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: units / seconds for name, seconds in best.items()}
