"""Timing shared by the benchmarks: the best of several runs, after a warm-up run.

`best_rates` times several programs in turns, so that a machine shared with other
work slows them alike rather than whichever happened to run at a busy moment.
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


def best_rates(runs: dict[str, Callable[[], object]], units: int, repeats: int) -> dict[str, float]:
    """`best_rate` of each of `runs`, timed in turns (each already warmed up)."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: units / seconds for name, seconds in best.items()}
