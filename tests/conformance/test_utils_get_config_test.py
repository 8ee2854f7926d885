"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/utils_get_config_test.py`.

`ipu.utils.get_ipu_config` before and after configuring two multi-IPU devices, and
`get_num_of_ipus_in_device` with and without a configuration.
"""

from __future__ import annotations

import pytest
import tensorflow as tf
from tensorflow.python import ipu


@pytest.fixture
def two_devices():
    config = ipu.config.IPUConfig()
    config.ipu_model.compile_ipu_code = True
    config.auto_select_ipus = [2, 4]
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testNoConfig")
def test_no_config():
    with pytest.raises(RuntimeError, match="No IPU devices configured."):
        ipu.utils.get_ipu_config()


@pytest.mark.follows("testGetConfig")
def test_get_config(tf1_graph, two_devices):
    result = ipu.utils.get_ipu_config(tf.compat.v1.Session())
    assert len(result) == 2
    for options in result:
        assert options.ipu_model_config.compile_ipu_code
        assert [d.auto_count for d in options.device_config] == [2, 4]
        assert options.creator_id == 1


@pytest.mark.follows("testGetNumberOfIpus")
def test_get_number_of_ipus(tf1_graph, two_devices):
    assert ipu.utils.get_num_of_ipus_in_device("/device:IPU:0") == 2
    assert ipu.utils.get_num_of_ipus_in_device("/device:IPU:1") == 4


@pytest.mark.follows("testGetNumberOfIpusNoConfig")
def test_get_number_of_ipus_no_config(tf1_graph):
    assert ipu.utils.get_num_of_ipus_in_device("/device:IPU:0") == 1
