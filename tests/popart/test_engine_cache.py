"""PopART's engine cache (enableEngineCaching + cachePath) and executables in the engine's
format: a session of the same model in another process builds only the executor the cache
names; damaged entries are compiled again; TensorFlow and PopART share one file format."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from small_model import build_small_model, reference_outputs

import popart
from openipu._src.engine.compile_policy import CompileMode
from openipu._src.engine.executable import executable_file as engine_file
from openipu._src.popart.session import engine_cache

CHILD = """
import sys
import numpy as np
import popart
sys.path.insert(0, {tests!r})
from small_model import build_small_model

model = build_small_model()
options = popart.SessionOptions()
options.enableEngineCaching = True
options.cachePath = {cache!r}
session = popart.InferenceSession(
    model.proto, popart.DataFlow(2, [model.y]), popart.DeviceManager().createIpuModelDevice({{}}),
    userOptions=options,
)
session.prepareDevice()
session.weightsFromHost()
anchors = session.initAnchorArrays()
x = np.arange(16, dtype=np.float32).reshape(2, 2, 4) / 8.0 - 1.0
session.run(popart.PyStepIO({{model.x: x}}, anchors))
print("RESULT=" + ",".join(f"{{v:.6f}}" for v in anchors[model.y].ravel()))
print("EXECUTOR=" + session._compiled_program().executor.value)
print("RACED=" + str(session._cached_program is None))
"""


def _start_child(cache) -> subprocess.Popen:
    code = CHILD.format(tests=os.path.dirname(os.path.abspath(__file__)), cache=str(cache))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish_child(process: subprocess.Popen) -> tuple[np.ndarray, str, bool, str]:
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    values = dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)
    result = np.array([float(v) for v in values["RESULT"].split(",")])
    return result, values["EXECUTOR"], values["RACED"] == "True", stderr


def _run_child(cache) -> tuple[np.ndarray, str, bool, str]:
    return _finish_child(_start_child(cache))


def _expected() -> np.ndarray:
    model = build_small_model()
    x = np.arange(16, dtype=np.float32).reshape(2, 2, 4) / 8.0 - 1.0
    return reference_outputs(model, x)[model.y].ravel()


@pytest.mark.slow
def test_a_second_process_builds_the_cached_executor_only(tmp_path):
    first, executor, raced, _ = _run_child(tmp_path)
    assert raced
    entries = os.listdir(tmp_path)
    assert len(entries) == 1 and entries[0].endswith(".popef")
    second, cached_executor, raced_again, _ = _run_child(tmp_path)
    assert not raced_again
    assert cached_executor == executor
    np.testing.assert_allclose(first, _expected(), rtol=1e-5)
    np.testing.assert_allclose(second, first, rtol=1e-6)


@pytest.mark.slow
def test_a_damaged_entry_is_compiled_again_with_a_warning(tmp_path):
    _run_child(tmp_path)
    (entry,) = os.listdir(tmp_path)
    path = tmp_path / entry
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    result, _, raced, stderr = _run_child(tmp_path)
    assert raced
    assert "cannot be used" in stderr and "compiles again" in stderr
    np.testing.assert_allclose(result, _expected(), rtol=1e-5)
    # Written anew, whole.
    assert engine_file.read(str(path)).program is not None


def test_an_entry_of_another_program_is_not_used(tmp_path, small_model, caplog):
    other = build_small_model(constant_multiplier=2.0)
    path = engine_cache.entry_path(str(tmp_path), "fingerprint-a")
    assert engine_cache.load(path, "fingerprint-a") is None  # no entry yet
    session = popart.InferenceSession(
        other.proto, popart.DataFlow(2, [other.y]), popart.DeviceManager().createIpuModelDevice({})
    )
    session.prepareDevice()
    engine_cache.store(path, "fingerprint-b", "other", session._compiled_program())
    with caplog.at_level("WARNING", logger=engine_cache.__name__):
        assert engine_cache.load(path, "fingerprint-a") is None  # stale: another program's
    assert f"{path} was compiled for another program" in caplog.text
    assert "the session compiles again" in caplog.text
    assert not os.path.exists(path)  # removed: the session writes its own


def test_compile_and_export_writes_the_engine_format(small_model, ipu_model_device, tmp_path):
    session = popart.InferenceSession(
        small_model.proto, popart.DataFlow(2, [small_model.y]), ipu_model_device
    )
    session.prepareDevice()
    path = tmp_path / "model.popef"
    session.compileAndExport(str(path))
    executable = engine_file.read(str(path))
    assert executable.kind == "popart-executable"
    assert executable.program == session._compiled_program()
    assert set(executable.sections) == {"model.onnx", "variables.npz"}
    # The reader of another session takes the executor from it, without measuring again.
    reader = popart.InferenceSession(
        small_model.proto, popart.DataFlow(2, [small_model.y]), ipu_model_device
    )
    reader.loadExecutable(str(path))
    reader.prepareDevice()
    assert reader._compiled_program().executor == executable.program.executor
    anchors = reader.initAnchorArrays()
    x = np.ones((2, 2, 4), np.float32)
    reader.run(popart.PyStepIO({small_model.x: x}, anchors))
    want = reference_outputs(small_model, x)[small_model.y]
    np.testing.assert_allclose(anchors[small_model.y], want, rtol=1e-6)


def test_the_readers_refuse_each_others_executables(small_model, ipu_model_device, tmp_path):
    from tensorflow.python import ipu

    session = popart.InferenceSession(
        small_model.proto, popart.DataFlow(2, [small_model.y]), ipu_model_device
    )
    session.prepareDevice()
    popart_file = tmp_path / "popart.popef"
    session.compileAndExport(str(popart_file))
    with pytest.raises(RuntimeError, match="popart-executable"):
        ipu.embedded_runtime.embedded_runtime_start(str(popart_file), [], "popart_file")

    tensorflow_file = tmp_path / "tf.poplar_exec"
    ipu.application_compile_op.experimental_application_compile_op(
        lambda x: x + 1.0, inputs=[np.zeros([2], np.float32)], output_path=str(tensorflow_file)
    )
    with pytest.raises(popart.popart_exception, match="'application' executable"):
        session2 = popart.InferenceSession(
            small_model.proto, popart.DataFlow(2, [small_model.y]), ipu_model_device
        )
        session2.loadExecutable(str(tensorflow_file))


def test_engine_caching_keeps_the_executor_it_measured(small_model, tmp_path):
    options = popart.SessionOptions()
    options.enableEngineCaching = True
    options.cachePath = str(tmp_path)

    def session():
        return popart.InferenceSession(
            small_model.proto,
            popart.DataFlow(2, [small_model.y]),
            popart.DeviceManager().createIpuModelDevice({}),
            userOptions=options,
        )

    first = session()
    first.prepareDevice()
    second = session()
    second.prepareDevice()
    assert second._cached_program == first._compiled_program()
    assert second._compiled_program().executor in tuple(CompileMode)


@pytest.mark.slow
def test_sessions_writing_the_same_entry_at_once_leave_a_valid_one(tmp_path):
    children = [_start_child(tmp_path) for _ in range(2)]
    for child in children:
        result, _, _, _ = _finish_child(child)
        np.testing.assert_allclose(result, _expected(), rtol=1e-5)
    entries = os.listdir(tmp_path)
    assert len(entries) == 1 and not entries[0].startswith(".tmp")
    assert engine_file.read(str(tmp_path / entries[0])).program is not None
    _, _, raced, stderr = _run_child(tmp_path)
    assert not raced and "cannot be used" not in stderr


def test_changed_session_options_make_a_new_entry_and_the_same_ones_hit(small_model, tmp_path):
    # The original's cache key hashes the options that change the compiled program
    # (willow/src/sessionoptions.cpp, std::hash<popart::SessionOptions>).
    def prepared(**changes):
        options = popart.SessionOptions()
        options.enableEngineCaching = True
        options.cachePath = str(tmp_path)
        for name, value in changes.items():
            setattr(options, name, value)
        session = popart.InferenceSession(
            small_model.proto,
            popart.DataFlow(2, [small_model.y]),
            popart.DeviceManager().createIpuModelDevice({}),
            userOptions=options,
        )
        session.prepareDevice()
        return session

    assert prepared()._cached_program is None
    assert len(os.listdir(tmp_path)) == 1
    assert prepared()._cached_program is not None  # same program, same options: a hit
    assert prepared(enableStochasticRounding=True)._cached_program is None  # not a stale hit
    assert prepared(partialsTypeMatMuls="half")._cached_program is None
    assert len(os.listdir(tmp_path)) == 3
    # An option the original's key leaves out (where reports go) shares the entry.
    assert prepared(logDir=str(tmp_path / "logs"))._cached_program is not None
    assert len([n for n in os.listdir(tmp_path) if n.endswith(".popef")]) == 3
