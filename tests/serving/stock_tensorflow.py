"""Running code in a Python without openipu: stock TensorFlow only.

The interpreter starts without `site` (`-S`), so no `.pth` file of the installation runs
(openipu's start-up hook and its editable path are both `.pth` files); site-packages is on
the path as a plain directory, so TensorFlow imports as usual.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap

_PRELUDE = """
import importlib.util, sys
assert importlib.util.find_spec("openipu") is None, "openipu is importable"
assert importlib.util.find_spec("_openipu_startup") is None
"""


def environment() -> dict[str, str]:
    """The environment of a stock TensorFlow process (with `-S`: see the module docstring)."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "HOME": os.environ.get("HOME", "/tmp"),
    }


def run_program(code: str, cwd: str | None = None) -> str:
    """Runs `code` with stock TensorFlow (openipu not importable); returns its output."""
    completed = subprocess.run(
        [sys.executable, "-S", "-c", _PRELUDE + code],
        env=environment(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if completed.returncode != 0:
        raise AssertionError(f"stock TensorFlow failed:\n{completed.stderr[-4000:]}")
    return completed.stdout


def run(code: str) -> object:
    """Runs `code` (which sets `result` to JSON-ready values) with stock TensorFlow; returns
    `result`."""
    program = (
        _PRELUDE
        + textwrap.dedent(code)
        + (
            "\nassert not [m for m in sys.modules if m.startswith(('openipu', '_openipu'))]"
            "\nimport json\nprint('RESULT=' + json.dumps(result))\n"
        )
    )
    stdout = run_program(program)
    line = [x for x in stdout.splitlines() if x.startswith("RESULT=")][-1]
    return json.loads(line[len("RESULT=") :])
