"""`SessionOptions.enableFloatingPointChecks`: on an IPU, a division by zero, an invalid
operation or an overflow stops `session.run` with Poplar's application runtime error
(popx/irlowering.cpp `setFloatingPointBehaviour`); other devices warn and compute."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import popart


def _session(checks: bool, device):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    y = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    out = builder.aiOnnx.div([x, y])
    builder.addOutputTensor(out)
    options = popart.SessionOptions()
    options.enableFloatingPointChecks = checks
    session = popart.InferenceSession(
        builder.getModelProto(), popart.DataFlow(1, [out]), device, userOptions=options
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()

    def run(numerator, divisor):
        feeds = {x: np.array(numerator, np.float32), y: np.array(divisor, np.float32)}
        session.run(popart.PyStepIO(feeds, anchors))
        return anchors[out].copy()

    return run


@pytest.fixture
def ipu():
    device = popart.DeviceManager().acquireAvailableDevice(1)
    yield device
    device.detach()


def test_checks_on_an_ipu_raise_on_a_division_by_zero(ipu):
    run = _session(True, ipu)
    np.testing.assert_array_equal(run([3.0, 4.0], [1.0, 2.0]), [3.0, 2.0])
    with pytest.raises(popart.poplar_application_runtime_error, match="Tiles in excepted state"):
        run([3.0, 4.0], [1.0, 0.0])
    with pytest.raises(popart.poplar_exception, match="invalid operation"):
        run([0.0, 4.0], [0.0, 1.0])


def test_without_checks_the_run_computes_ieee_values(ipu):
    run = _session(False, ipu)
    np.testing.assert_array_equal(run([3.0, 4.0], [1.0, 0.0]), [3.0, np.inf])


def test_checks_on_a_cpu_device_warn_and_compute(caplog):
    device = popart.DeviceManager().createCpuDevice()
    # The "popart" logger's own level: an earlier test may have set it (popart.getLogger()).
    with caplog.at_level(logging.WARNING, logger="popart"):
        run = _session(True, device)
        np.testing.assert_array_equal(run([3.0, 4.0], [1.0, 0.0]), [3.0, np.inf])
    assert "Floating point checks cannot be enabled for non IPU devices" in caplog.text
