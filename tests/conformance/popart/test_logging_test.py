"""graphcore/popart tests/integration/logging_test.py: the logger's level switches the
Builder's TRACE messages on and off (Cpu)."""

import pytest

import popart


@pytest.mark.follows("test_setLevel")
def test_setLevel(capfd):  # noqa: N802
    def check_loglevel(level):
        popart.getLogger().setLevel(level)
        builder = popart.Builder()
        i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 3]))
        builder.aiOnnx.abs([i1])
        return capfd.readouterr()[1]

    try:
        assert "Adding ai.onnx.Abs" in check_loglevel("TRACE")
        assert check_loglevel("OFF") == ""
        assert "Adding ai.onnx.Abs" in check_loglevel("TRACE")
    finally:
        popart.getLogger().setLevel("OFF")
