"""compileAndExport / saveExecutable / saveVariables / loadExecutable, and atomic file writes."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest
from small_model import build_small_model, reference_outputs

import popart
from openipu._src.popart.session import executable_file


def make_session(model, device, constant_weights=False):
    options = popart.SessionOptions()
    options.constantWeights = constant_weights
    return popart.InferenceSession(
        model.proto, popart.DataFlow(2, [model.y]), device, userOptions=options
    )


def run(session, model, x):
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({model.x: x}, anchors))
    return anchors[model.y]


def test_export_and_load_round_trip(small_model, ipu_model_device, tmp_path):
    new_w = np.full((4, 3), 0.5, np.float32)
    writer = make_session(small_model, ipu_model_device)
    writer.prepareDevice()
    writer.weightsFromHost()
    writer.writeWeights(popart.PyWeightsIO({small_model.w: new_w}))
    writer.weightsFromHost()  # the executable holds the device's weights
    path = tmp_path / "model.popef"
    writer.compileAndExport(str(path))
    assert zipfile.is_zipfile(path)

    reader = make_session(small_model, ipu_model_device)
    reader.loadExecutable(str(path))
    reader.prepareDevice()
    x = np.ones((2, 2, 4), np.float32)
    weights = {**small_model.weights, small_model.w: new_w}
    np.testing.assert_allclose(
        run(reader, small_model, x), reference_outputs(small_model, x, weights)[small_model.y], 1e-6
    )


def test_save_executable_into_a_directory(small_model, ipu_model_device, tmp_path):
    session = make_session(small_model, ipu_model_device)
    with pytest.raises(popart.popart_exception, match="after prepareDevice"):
        session.saveExecutable(str(tmp_path))
    session.prepareDevice()
    session.saveExecutable(str(tmp_path))
    session.saveVariables(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["executable.popef", "variables.popef"]
    other = make_session(small_model, ipu_model_device)
    other.loadExecutable(str(tmp_path / "executable.popef"))
    with pytest.raises(popart.popart_exception, match="holds variables"):
        make_session(small_model, ipu_model_device).loadExecutable(
            str(tmp_path / "variables.popef")
        )


def test_load_rejects_other_models_and_other_files(small_model, ipu_model_device, tmp_path):
    path = tmp_path / "exe.popef"
    make_session(small_model, ipu_model_device).compileAndExport(str(path))
    other_model = build_small_model(constant_multiplier=3.0)
    with pytest.raises(popart.popart_exception, match="compiled for another model"):
        make_session(other_model, ipu_model_device).loadExecutable(str(path))
    junk = tmp_path / "junk.popef"
    junk.write_bytes(b"not an executable")
    with pytest.raises(popart.popart_exception, match="not an executable written by"):
        make_session(small_model, ipu_model_device).loadExecutable(str(junk))
    with pytest.raises(popart.popart_exception, match="Could not open file"):
        make_session(small_model, ipu_model_device).loadExecutable(str(tmp_path / "none"))
    prepared = make_session(small_model, ipu_model_device)
    prepared.prepareDevice()
    with pytest.raises(popart.popart_exception, match="before prepareDevice"):
        prepared.loadExecutable(str(path))


def test_export_to_an_unwritable_place_is_an_os_error(small_model, ipu_model_device, tmp_path):
    with pytest.raises(OSError):
        make_session(small_model, ipu_model_device).compileAndExport(
            str(tmp_path / "no" / "such" / "dir" / "exe.popef")
        )


def test_writes_are_atomic(small_model, ipu_model_device, tmp_path, monkeypatch):
    path = tmp_path / "exe.popef"
    path.write_bytes(b"previous contents")
    session = make_session(small_model, ipu_model_device)

    def interrupted(source, target):
        raise KeyboardInterrupt  # the writer dies between writing and moving into place

    monkeypatch.setattr(executable_file.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        session.compileAndExport(str(path))
    assert path.read_bytes() == b"previous contents"
    assert os.listdir(tmp_path) == ["exe.popef"]  # the temporary file is gone
    monkeypatch.undo()
    session.compileAndExport(str(path))
    assert zipfile.is_zipfile(path)


def test_model_to_host_is_atomic(small_model, ipu_model_device, tmp_path, monkeypatch):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"old model")
    session = make_session(small_model, ipu_model_device)
    session.prepareDevice()

    monkeypatch.setattr(executable_file.os, "fdopen", _failing_fdopen)
    with pytest.raises(OSError, match="No space left"):
        session.modelToHost(str(path))
    assert path.read_bytes() == b"old model"
    assert os.listdir(tmp_path) == ["model.onnx"]


class _FailingStream:
    def __init__(self, handle):
        self._handle = handle

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        os.close(self._handle)

    def write(self, data):
        raise OSError(28, "No space left on device")


def _failing_fdopen(handle, mode="r"):
    return _FailingStream(handle)
