"""Without Chromium the browser tests fail and say why: CI installs it, so a missing browser
is a broken setup, not a reason to skip."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys


def test_a_missing_browser_fails_the_browser_tests_with_the_reason():
    test = pathlib.Path(__file__).with_name("test_html_in_browser.py")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            f"{test}::test_the_page_loads_nothing_but_itself",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OPENIPU_TEST_CHROMIUM": "/nonexistent/chromium"},
        timeout=300,
    )
    assert result.returncode == 1, result.stdout[-2000:]
    assert "Chromium is missing (/nonexistent/chromium)" in result.stdout
    assert "skipped" not in result.stdout
