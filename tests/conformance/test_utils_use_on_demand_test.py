"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/utils_use_on_demand_test.py`.

The configuration the IPU system holds after `configure_ipu_system` keeps the device
connection type asked for, unless `TF_POPLAR_FLAGS` has `--use_on_demand`, which makes
it ON_DEMAND. As in the original, it is read back with the backend's
`gen_ipu_ops.ipu_get_configuration` op, whose serialized `IpuOptions` protobufs are parsed.
"""

from __future__ import annotations

import os
from unittest import mock

import pytest
import tensorflow as tf
from tensorflow.compiler.plugin.poplar.driver.config_pb2 import IpuOptions
from tensorflow.compiler.plugin.poplar.ops import gen_ipu_ops
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
    with tf.Graph().as_default() as graph, tf.device("CPU"):
        with tf.compat.v1.Session(graph=graph) as session:
            configurations = session.run(gen_ipu_ops.ipu_get_configuration())
    assert len(configurations) == 1
    options = IpuOptions()
    options.ParseFromString(configurations[0])
    return options.device_connection_type


@pytest.mark.follows("testNoFlag")
def test_no_flag():
    assert _configured_type(DeviceConnectionType.ALWAYS) == DeviceConnectionType.ALWAYS.value


@pytest.mark.follows("testFlag")
def test_flag():
    flags = os.environ.get("TF_POPLAR_FLAGS", "") + " --use_on_demand"
    with mock.patch.dict("os.environ", {"TF_POPLAR_FLAGS": flags}):
        assert _configured_type(DeviceConnectionType.ALWAYS) == DeviceConnectionType.ON_DEMAND.value
