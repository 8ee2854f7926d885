"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/utils_use_on_demand_test.py`.

The configuration the IPU system holds after `configure_ipu_system` keeps the device
connection type asked for, unless `TF_POPLAR_FLAGS` has `--use_on_demand`, which makes
it ON_DEMAND. The original reads the configuration back through its internal
`gen_ipu_ops.ipu_get_configuration` op (an `IpuOptions` protobuf); the public
`ipu.config.get_ipu_config` reads it here.
"""

from __future__ import annotations

import os
from unittest import mock

import pytest
from tensorflow.python.ipu import config
from tensorflow.python.ipu.utils import DeviceConnectionType


@pytest.fixture(autouse=True)
def reset():
    yield
    config.reset_ipu_configuration()


def _configured_type(connection_type):
    cfg = config.IPUConfig()
    cfg.device_connection.type = connection_type
    cfg.configure_ipu_system()
    (configuration,) = config.get_ipu_config()
    return configuration.device_connection.type


@pytest.mark.follows("testNoFlag")
def test_no_flag():
    assert _configured_type(DeviceConnectionType.ALWAYS) == DeviceConnectionType.ALWAYS


@pytest.mark.follows("testFlag")
def test_flag():
    flags = os.environ.get("TF_POPLAR_FLAGS", "") + " --use_on_demand"
    with mock.patch.dict("os.environ", {"TF_POPLAR_FLAGS": flags}):
        assert _configured_type(DeviceConnectionType.ALWAYS) == DeviceConnectionType.ON_DEMAND
