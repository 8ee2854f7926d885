"""The `openipu` command: `info` lists the emulated machine, `demo` trains and learns."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest


def _openipu(*args: str, ipus: int = 4) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENIPU_NUM_IPUS": str(ipus)}
    return subprocess.run(
        [sys.executable, "-m", "openipu._src.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_info_lists_every_device_of_the_emulated_machine():
    result = _openipu("info", ipus=4)
    assert result.returncode == 0, result.stderr[-2000:]
    ids = re.findall(r"Id: \[\s*(\d+)\]", result.stdout)
    # 4 single IPUs, 2 pairs, 1 group of 4 (as gc-info lists a 4-IPU machine).
    assert ids == [str(i) for i in range(7)]
    assert "type: [Multi IPU (4 IPUs)], IPUs: [0,1,2,3]" in result.stdout


@pytest.mark.slow
def test_demo_trains_both_parts_to_well_above_chance():
    result = _openipu(
        "demo", "--epochs", "2", "--samples", "6400", "--steps-per-execution", "20", ipus=4
    )
    assert result.returncode == 0, result.stderr[-2000:]
    accuracies = [float(a) for a in re.findall(r"test accuracy (\d\.\d+)", result.stdout)]
    # Ten classes: chance is 0.1; the single-IPU and the pipelined, replicated runs learn.
    # Two short epochs end between about 0.5 and 0.8 (replica threads make runs differ a
    # little), so the bar is three times chance rather than a figure one run may miss.
    assert len(accuracies) == 2 and min(accuracies) > 0.3, result.stdout
    assert "2-stage pipeline on a 4-IPU device (2 replicas)" in result.stdout
