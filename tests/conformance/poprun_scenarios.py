"""The original's poprun tests: their scenarios run in every instance of openipu's poprun.

The original runs such a test file under `poprun` (`poprun_py_test`: several instances,
each running all its test methods). Here a program next to the ported module holds the
scenarios as functions decorated with `@scenario`; `main()` runs each in turn (all
instances in the same order, as the original's test runner does) and writes, per
instance, which passed and the error of those that failed. The ported module starts
the program once (`run`) and each test asserts its scenario passed on every instance.
Not a test module.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import traceback
from collections.abc import Callable

_SCENARIOS: dict[str, Callable[[], None]] = {}


def scenario(function: Callable[[], None]) -> Callable[[], None]:
    _SCENARIOS[function.__name__] = function
    return function


def main() -> None:
    """In an instance: runs the scenarios, records the outcome of each."""
    import popdist

    out = pathlib.Path(sys.argv[1])
    outcomes = {}
    for name, function in _SCENARIOS.items():
        try:
            function()
            outcomes[name] = "ok"
        except Exception:  # noqa: BLE001 - recorded for the test that follows this scenario
            outcomes[name] = traceback.format_exc(limit=-6)
        print(f"scenario {name}: {outcomes[name]}", flush=True)
    (out / f"instance_{popdist.getInstanceIndex()}.json").write_text(json.dumps(outcomes))


def run(
    program: pathlib.Path,
    out: pathlib.Path,
    instances: int = 2,
    replicas: int = 2,
    timeout: int = 300,
):
    """The outcomes of each instance's scenarios, in instance order."""
    done = subprocess.run(
        [
            sys.executable, "-m", "openipu._src.distributed.poprun",
            "--num-instances", str(instances), "--num-replicas", str(replicas),
            "--timeout", str(timeout), sys.executable, str(program), str(out),
        ],
        capture_output=True, text=True, timeout=timeout + 60,
    )  # fmt: skip
    files = [out / f"instance_{i}.json" for i in range(instances)]
    if not all(f.exists() for f in files):
        raise AssertionError(
            f"poprun failed ({done.returncode}): {done.stdout[-3000:]} {done.stderr[-3000:]}"
        )
    return [json.loads(f.read_text()) for f in files]


def assert_passed(outcomes: list[dict[str, str]], name: str) -> None:
    for instance, recorded in enumerate(outcomes):
        assert recorded[name] == "ok", f"instance {instance}: {recorded[name]}"
