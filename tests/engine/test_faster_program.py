"""`faster_program`: the engine's timing of executors picks the faster one, and times close
candidates for more rounds than clearly different ones."""

from __future__ import annotations

import time

from openipu._src.engine.onnx_runtime_program import faster_program


class _Sleeper:
    """A program that takes `seconds` a call and counts its calls."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    def __call__(self, inputs: object) -> None:
        self.calls += 1
        time.sleep(self.seconds)


def test_picks_the_faster_candidate() -> None:
    slow, fast = _Sleeper(0.004), _Sleeper(0.001)
    assert faster_program([slow, fast], {}) == 1
    # A clear winner: the minimum rounds only (one untimed and two timed calls each).
    assert fast.calls == 7 * 3


def test_close_candidates_get_more_rounds() -> None:
    first, second = _Sleeper(0.001), _Sleeper(0.001)
    faster_program([first, second], {}, min_seconds=2.0, max_runs=12)
    assert first.calls == second.calls == 12 * 3
