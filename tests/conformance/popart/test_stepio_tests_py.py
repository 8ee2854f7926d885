"""graphcore/popart tests/integration/stepio_tests/stepio_tests_py.py: inputs fed by a
PyStepIO of buffers, and by a PyStepIOCallback that hands each batch over (and receives
each anchor batch) through callbacks, over two batches per step. The original runs them on
IPU hardware; here on an emulated IPU."""

import pytest
from popart_stepio_checks import check_buffer_input, check_callback_input

import popart


def _ipu():
    return popart.DeviceManager().createIpuModelDevice({"numIPUs": 1})


@pytest.mark.follows("test_stepio_bufferinput_ipu")
def test_stepio_bufferinput_ipu():
    check_buffer_input(_ipu())


@pytest.mark.follows("test_stepio_callbackinput_ipu")
def test_stepio_callbackinput_ipu():
    check_callback_input(_ipu())
