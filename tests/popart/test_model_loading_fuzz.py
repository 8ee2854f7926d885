"""Every ONNX model loads or fails cleanly: seeded mutations of small models (`model_mutations`)
given to `popart.InferenceSession` and `popart.Builder(modelProtoOrFilename=...)` either load or
raise a popart_exception naming what is wrong; never another exception, a crash or a hang.

A model a session accepts must also load in onnxruntime, the independent judge of validity.
Loading only (no prepareDevice) compiles nothing, so 2000 cases take seconds.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from model_mutations import BASE_MODELS, mutated_case

import popart

CASE_TIME_LIMIT_SECONDS = 10
FAST_SEEDS = range(200)
SLOW_SEEDS = range(200, 2200)


class CaseTimedOut(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Interrupts a case that runs longer than `seconds` (main thread only: SIGALRM)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise CaseTimedOut

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _words_of_the_models() -> set[str]:
    """Node, tensor, op and attribute names of the base models and of what mutations add."""
    words = {"nobody_makes_this", "no_such_attribute", "NoSuchOp", "no.such.domain"}
    words |= {"opset", "ir_version", "IR version", "UTF-8", "ModelProto", "bytes"}
    for build in BASE_MODELS.values():
        model = build()
        graphs = [model.graph]
        graphs += [a.g for node in model.graph.node for a in node.attribute if a.HasField("g")]
        for graph in graphs:
            for node in graph.node:
                words |= {node.name, node.op_type, *node.input, *node.output}
                words |= {attribute.name for attribute in node.attribute}
            words |= {value.name for value in [*graph.input, *graph.output, *graph.initializer]}
    return words - {""}


WORDS = _words_of_the_models()


def names_something(message: str) -> bool:
    return any(re.search(rf"(?<!\w){re.escape(word)}(?!\w)", message) for word in WORDS)


@dataclass
class Outcomes:
    accepted: list[int] = field(default_factory=list)
    rejected: int = 0
    raw: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)
    accepted_but_invalid: list[str] = field(default_factory=list)


def load_all(seeds: range) -> Outcomes:
    import onnxruntime

    device = popart.DeviceManager().createIpuModelDevice({})
    outcomes = Outcomes()
    for seed in seeds:
        case = mutated_case(seed)
        loaders = {
            "InferenceSession": lambda data=case.data: popart.InferenceSession(
                data, popart.DataFlow(1, ["y"]), device
            ),
            "Builder": lambda data=case.data: popart.Builder(modelProtoOrFilename=data),
        }
        for what, load in loaders.items():
            where = f"seed {seed} ({case.base}, {case.mutations}) in {what}"
            try:
                with time_limit(CASE_TIME_LIMIT_SECONDS):
                    load()
            except popart.popart_exception as error:
                outcomes.rejected += 1
                if not names_something(str(error)):
                    outcomes.unnamed.append(f"{where}: {error}")
            except CaseTimedOut:
                outcomes.hangs.append(where)
            except Exception as error:  # noqa: BLE001 - what the test looks for
                outcomes.raw.append(f"{where}: {type(error).__name__}: {error}")
            else:
                if what == "InferenceSession":
                    outcomes.accepted.append(seed)
                    try:
                        onnxruntime.InferenceSession(case.data, providers=["CPUExecutionProvider"])
                    except Exception as error:  # noqa: BLE001 - onnxruntime's verdict
                        outcomes.accepted_but_invalid.append(f"{where}: {error}")
    return outcomes


def check(outcomes: Outcomes, cases: int) -> None:
    assert outcomes.raw == []
    assert outcomes.hangs == []
    assert outcomes.unnamed == []
    assert outcomes.accepted_but_invalid == []
    # The mutations break most models; a corpus that no longer does would prove nothing.
    assert outcomes.rejected > cases
    assert len(outcomes.accepted) > cases // 20


@pytest.fixture(autouse=True)
def quiet_onnxruntime():
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)


def test_mutated_models_load_or_fail_cleanly():
    check(load_all(FAST_SEEDS), len(FAST_SEEDS))


@pytest.mark.slow
def test_two_thousand_mutated_models_load_or_fail_cleanly():
    check(load_all(SLOW_SEEDS), len(SLOW_SEEDS))


def test_the_time_limit_interrupts_a_hang():
    with pytest.raises(CaseTimedOut), time_limit(1):
        _spin()


def _spin() -> None:
    while True:
        pass


def test_the_mutations_are_seeded():
    assert mutated_case(7).data == mutated_case(7).data
    assert len({mutated_case(seed).data for seed in range(20)}) > 15
