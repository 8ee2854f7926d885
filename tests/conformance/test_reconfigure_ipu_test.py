"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/reconfigure_ipu_test.py`.

Configuring the IPU system again: refused without a reset when asked, allowed after
`reset_ipu_configuration` (or by default, which resets), `get_ipu_config` after a reset,
and resets from inside an IPU scope or with a non-empty default graph.
"""

from __future__ import annotations

import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _first():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [1, 1]
    return config


def _second():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [1, 2, 1]
    return config


@pytest.fixture(autouse=True)
def _reset_afterwards():
    yield
    ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testChangingConfigWithoutResetRaises")
def test_changing_config_without_reset_raises():
    _first().configure_ipu_system()
    with pytest.raises(tf.errors.FailedPreconditionError):
        ipu.config.configure_ipu_system(_second(), reset_configuration=False)


def _check_configured_as(config):
    expected = config._create_protobuf()
    configs = ipu.config.get_ipu_config()
    assert configs
    for got in configs:
        assert got == expected


@pytest.mark.follows("testCanChangeConfigurationAfterReset")
def test_can_change_configuration_after_reset():
    _first().configure_ipu_system()
    ipu.config.reset_ipu_configuration()
    second = _second()
    second.configure_ipu_system()
    _check_configured_as(second)


@pytest.mark.follows("testNoConfigAfterResetting")
def test_no_config_after_resetting():
    _first().configure_ipu_system()
    ipu.config.reset_ipu_configuration()
    with pytest.raises(RuntimeError):
        ipu.config.get_ipu_config()


@pytest.mark.follows("testCanResetEmptyConfiguration")
def test_can_reset_empty_configuration():
    ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testResetsAutomaticallyWhenConfiguring")
def test_resets_automatically_when_configuring():
    _first().configure_ipu_system()
    second = _second()
    second.configure_ipu_system()
    _check_configured_as(second)


@pytest.mark.follows("testCanResetWithinIPUDeviceContext")
def test_can_reset_within_ipu_device_context():
    _first().configure_ipu_system()
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testOnlyResetOpsAreRun")
def test_only_reset_ops_are_run():
    with tf.Graph().as_default():
        with ipu.scopes.ipu_scope("/device:IPU:9999999"):
            tf.constant(0.5)
        ipu.config.reset_ipu_configuration()
