"""graphcore/popart tests/integration/logging_test.py: the logger's level switches the
Builder's TRACE messages on and off (Cpu)."""

import logging

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

    before = logging.getLogger("popart").level
    try:
        assert "Adding ai.onnx.Abs" in check_loglevel("TRACE")
        assert check_loglevel("OFF") == ""
        assert "Adding ai.onnx.Abs" in check_loglevel("TRACE")
    finally:
        # The original's test ends at OFF; later tests here expect the level it found.
        logging.getLogger("popart").setLevel(before)
