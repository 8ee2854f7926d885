"""Files are written atomically: a process killed in the middle of writing a model
(modelToHost), an executable (compileAndExport) or a checkpoint of the variables
(saveVariables) leaves the previous file as it was, usable by a new session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import numpy as np
import onnx
import pytest
from training_helpers import build_regression, read_weights

import popart
from openipu._src.popart.session import executable_file

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "killed_writer.py")
FILE_NAMES = {
    "modelToHost": "model.onnx",
    "compileAndExport": "training.popef",
    "saveVariables": "variables.popef",
}


def kill_in_mid_write(kind: str, directory: str) -> None:
    child = subprocess.Popen(
        [sys.executable, CHILD, kind, directory],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # A child that never gets to the write is killed too, so the test cannot hang.
    watchdog = threading.Timer(300, child.kill)
    watchdog.start()
    try:
        line = child.stdout.readline()
        if line.strip() != "half-written":
            child.kill()
            _, errors = child.communicate()
            pytest.fail(f"the writer stopped before writing half a file:\n{errors[-3000:]}")
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert child.returncode == -signal.SIGKILL


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(FILE_NAMES))
def test_a_writer_killed_mid_write_leaves_the_previous_file(kind, tmp_path):
    kill_in_mid_write(kind, str(tmp_path))
    path = tmp_path / FILE_NAMES[kind]
    expected = (tmp_path / (FILE_NAMES[kind] + ".expected")).read_bytes()
    # The kill came in the middle of the write: half of the new file is in a temporary.
    (temporary,) = [name for name in os.listdir(tmp_path) if name.startswith(".tmp-")]
    assert (tmp_path / temporary).stat().st_size > 0
    assert path.read_bytes() == expected
    # ... and the previous file still works.
    model = build_regression(onnx_loss=True)
    if kind == "modelToHost":
        onnx.checker.check_model(str(path))
        saved = onnx.load_model(str(path))
        assert {init.name for init in saved.graph.initializer} >= {model.w, model.b}
        return
    if kind == "saveVariables":
        variables = executable_file.read_artifact(str(path)).variables
        assert variables[model.w].shape == model.initial[model.w].shape
        assert not np.allclose(variables[model.w], model.initial[model.w])  # trained
        return
    session = popart.TrainingSession(
        model.proto,
        popart.DataFlow(2, {}),
        model.loss,
        popart.SGD({"defaultLearningRate": (0.1, True), "defaultMomentum": (0.9, True)}),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    session.loadExecutable(str(path))
    session.prepareDevice()
    session.weightsFromHost()
    # The session starts from the executable's weights: those trained before the first write.
    saved = executable_file.read_artifact(str(path)).variables
    weights = read_weights(session, model)
    np.testing.assert_array_equal(weights["w"], saved[model.w])
    assert not np.allclose(weights["w"], model.initial[model.w])


def test_files_get_the_permissions_open_would_give(tmp_path):
    mask = os.umask(0o022)
    os.umask(mask)
    model = build_regression(onnx_loss=True)
    session = popart.TrainingSession(
        model.proto, popart.DataFlow(1, {}), model.loss,
        popart.SGD({"defaultLearningRate": (0.1, True)}),
        popart.DeviceManager().createIpuModelDevice({}),
    )  # fmt: skip
    session.prepareDevice()
    new = tmp_path / "new.onnx"
    session.modelToHost(str(new))
    assert new.stat().st_mode & 0o777 == 0o666 & ~mask
    existing = tmp_path / "existing.onnx"
    existing.write_bytes(b"")
    existing.chmod(0o640)
    session.modelToHost(str(existing))
    assert existing.stat().st_mode & 0o777 == 0o640
