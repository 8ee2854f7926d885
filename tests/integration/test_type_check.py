"""All of `openipu._src` type-checks with mypy (configured in pyproject.toml, `[tool.mypy]`):
the engine, the configuration and PopART's session under strict options (complete hints, no
untyped calls, no implicit Any returned), the rest with the bodies of unannotated functions
checked too."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mypy_finds_no_errors_in_the_implementation(tmp_path):
    pytest.importorskip("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy_cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout
