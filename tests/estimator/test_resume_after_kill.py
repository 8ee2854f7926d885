"""A training killed mid-way resumes from its last checkpoint, and ends as if never killed.

The child (`killed_training.py`) trains to step 20 in loops of 4 steps, a checkpoint after
each loop, and kills itself with SIGKILL during its third loop's hooks; run again, it
restores the step-8 checkpoint and trains the last 12 steps. Its weights then equal those
of a training that was never interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "killed_training.py")


def _train(model_dir: str, kill_at: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, CHILD, model_dir, str(kill_at)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _weights(model_dir: str) -> dict[str, np.ndarray]:
    path = tf.train.latest_checkpoint(model_dir)
    return {name: tf.train.load_variable(path, name) for name, _ in tf.train.list_variables(path)}


@pytest.mark.slow
def test_killed_training_resumes_from_its_last_checkpoint(tmp_path):
    killed_dir, whole_dir = str(tmp_path / "killed"), str(tmp_path / "whole")
    killed = _train(killed_dir, kill_at=3)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    # The third loop ran but was not saved: the last checkpoint is step 8's, complete.
    assert _weights(killed_dir)["global_step"] == 8

    resumed = _train(killed_dir, kill_at=0)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(resumed.stdout.strip().splitlines()[-1]) == {"start_step": 8, "runs": 3}

    whole = _train(whole_dir, kill_at=0)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert json.loads(whole.stdout.strip().splitlines()[-1]) == {"start_step": 0, "runs": 5}

    resumed_weights, whole_weights = _weights(killed_dir), _weights(whole_dir)
    assert resumed_weights["global_step"] == whole_weights["global_step"] == 20
    for name in ("vs/kernel", "vs/bias"):
        np.testing.assert_allclose(resumed_weights[name], whole_weights[name], rtol=1e-6)
