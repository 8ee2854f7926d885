"""PopART sessions on the cost model: out of memory at prepareDevice, and the summary.

The model is a MatMul with a 1024 x 1024 float weight (4 MiB): it cannot fit on an IPU
Model device of 4 tiles (4 x 624 KiB), as on the original's IpuModel, and fits easily
on a full Mk2 IPU. Results are checked against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import popart


def _session(tiles, engine_options=None):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 1024]))
    w = builder.addInitializedInputTensor(np.full([1024, 1024], 0.5, np.float32))
    y = builder.aiOnnx.matmul([x, w])
    builder.addOutputTensor(y)
    options = popart.SessionOptions()
    if engine_options:
        options.engineOptions = engine_options
    device = popart.DeviceManager().createIpuModelDevice({"tilesPerIPU": tiles})
    session = popart.InferenceSession(
        builder.getModelProto(), popart.DataFlow(1, [y]), device, userOptions=options
    )
    return session, x, y


def test_a_model_too_big_for_the_device_raises_out_of_memory_at_prepare_device():
    session, _, _ = _session(tiles=4)
    with pytest.raises(popart.OutOfMemoryException) as caught:
        session.prepareDevice()
    assert "Out of memory on tile" in str(caught.value)
    summary = caught.value.getSummaryReport()
    assert "Fits in memory: NO" in summary and "4 tiles of 638976 bytes" in summary


def test_allow_out_of_memory_prepares_and_runs():
    session, x, y = _session(tiles=4, engine_options={"debug.allowOutOfMemory": "true"})
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    data = np.arange(2048, dtype=np.float32).reshape(2, 1024) / 1024
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_allclose(anchors[y], data @ np.full([1024, 1024], 0.5), rtol=1e-5)


def test_a_full_ipu_fits_and_reports_the_memory():
    session, x, y = _session(tiles=1472)
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: np.ones([2, 1024], np.float32)}, anchors))
    np.testing.assert_allclose(anchors[y], np.full([2, 1024], 512.0))
    summary = session.getSummaryReport()
    assert "Cost model:" in summary and "Fits in memory: yes" in summary
    # The weight (4 MiB) is in the report's memory.
    weights = [line for line in summary.splitlines() if line.strip().startswith("weights:")]
    assert weights and int(weights[0].split(":")[1]) >= 1024 * 1024 * 4
