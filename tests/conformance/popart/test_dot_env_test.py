"""graphcore/popart tests/integration/dot_tests/dot_env_test.py: POPART_DOT_CHECKS names the
IR checkpoints whose .dot files a session writes to `SessionOptions.logDir`: none, two
(FWD0:FINAL) or three (FWD0:FWD1:FINAL) for a one-op model (Cpu)."""

import tempfile
from pathlib import Path

import pytest

import popart


def _dot_files_written():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    o = builder.aiOnnx.identity([i1])
    builder.addOutputTensor(o)
    opts = popart.SessionOptions()
    with tempfile.TemporaryDirectory() as tmpdir:
        opts.logDir = tmpdir
        popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
            userOptions=opts,
            deviceInfo=popart.DeviceManager().createCpuDevice(),
        )
        files = sorted(Path(tmpdir).glob("*.dot"))
        texts = [f.read_text() for f in files]
    return [f.name for f in files], texts


@pytest.mark.follows("test_basic")
def test_basic(monkeypatch):
    monkeypatch.setenv("POPART_DOT_CHECKS", "")
    assert _dot_files_written()[0] == []

    monkeypatch.setenv("POPART_DOT_CHECKS", "FWD0:FINAL")
    names, texts = _dot_files_written()
    assert len(names) == 2
    assert all(text.startswith("digraph net {") and "Identity" in text for text in texts)

    monkeypatch.setenv("POPART_DOT_CHECKS", "FWD0:FWD1:FINAL")
    assert len(_dot_files_written()[0]) == 3
