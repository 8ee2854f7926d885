"""Running code in a Python without openipu: stock TensorFlow only.

The interpreter starts without `site` (`-S`), so no `.pth` file of the installation runs
(openipu's start-up hook and its editable path are both `.pth` files); site-packages is on
the path as a plain directory, so TensorFlow imports as usual.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
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


# One stock TensorFlow process serves every `run` of a test process (each process start
# imports TensorFlow: seconds of CPU). It executes each snippet in a fresh namespace and
# answers with a JSON line; the snippet's own prints go to its stderr.
_SERVER = """
import contextlib, json, sys, traceback
reply_to = sys.stdout
for line in sys.stdin:
    namespace = {"__name__": "__snippet__"}
    try:
        with contextlib.redirect_stdout(sys.stderr):
            exec(json.loads(line), namespace)
        reply = {"result": namespace["result"]}
    except BaseException:
        reply = {"error": traceback.format_exc()}
    reply_to.write(json.dumps(reply) + "\\n")
    reply_to.flush()
"""

_server: subprocess.Popen | None = None
_server_errors = tempfile.TemporaryFile("w+")  # the server's stderr


def _stop_server() -> None:
    if _server is not None and _server.poll() is None:
        _server.stdin.close()
        _server.wait(timeout=60)


def _started_server() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen(
            [sys.executable, "-S", "-c", _PRELUDE + _SERVER],
            env=environment(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=_server_errors,
            text=True,
        )
        atexit.register(_stop_server)
    return _server


def run(code: str) -> object:
    """Runs `code` (which sets `result` to JSON-ready values) with stock TensorFlow; returns
    `result`."""
    snippet = textwrap.dedent(code) + (
        "\nimport sys"
        "\nassert not [m for m in sys.modules if m.startswith(('openipu', '_openipu'))]\n"
    )
    server = _started_server()
    server.stdin.write(json.dumps(snippet) + "\n")
    server.stdin.flush()
    line = server.stdout.readline()
    if not line:
        _server_errors.seek(0)
        raise AssertionError(f"stock TensorFlow failed:\n{_server_errors.read()[-4000:]}")
    reply = json.loads(line)
    if "error" in reply:
        raise AssertionError(f"stock TensorFlow failed:\n{reply['error'][-4000:]}")
    return reply["result"]
