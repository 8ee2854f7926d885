"""Timing shared by the benchmarks: the best of several runs, after a warm-up run."""

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
