"""Rules as the original has them (audit of pipelining/distributed): user programs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.compiler import scopes
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.distributed import host_collective_ops
from openipu._src.optimizers.cross_replica_optimizer import CrossReplicaOptimizer
from openipu._src.optimizers.gradient_accumulation_optimizer import (
    GradientAccumulationOptimizerV2,
)
from openipu._src.system import configure, seeds
from openipu._src.utils import reset_ipu_seed


@pytest.fixture(autouse=True)
def _reset():
    configure.reset_ipu_configuration()
    yield
    configure.reset_ipu_configuration()


def _configure(auto_select_ipus=1):
    config = IPUConfig()
    config.auto_select_ipus = auto_select_ipus
    configure.configure_ipu_system(config)
    return configure.current_system()


def test_unconfigured_system_is_a_failed_precondition():  # F15
    with pytest.raises(
        tf.errors.FailedPreconditionError, match="^No device target has been configured"
    ):
        configure.current_system()


def test_ordinal_beyond_the_configuration_is_an_internal_error():  # F14
    system = _configure()
    with pytest.raises(
        tf.errors.InternalError, match="^Device ordinal 2 not in device configuration list"
    ):
        system.device(2)


def test_no_device_of_that_size_is_a_failed_precondition():  # F17
    with pytest.raises(
        tf.errors.FailedPreconditionError,
        match="^Unsupported number of IPUs requested - could not find an IPU device with 3 IPUs "
        "for the TensorFlow virtual device /device:IPU:0",
    ):
        _configure(3)


def test_no_free_device_is_an_internal_error():  # F16
    with pytest.raises(
        tf.errors.InternalError,
        match="^Could not find an available device for TensorFlow virtual device /device:IPU:1. "
        "This device was expected to have 16 IPU",
    ):
        _configure([16, 16])


def test_reset_ipu_seed_before_configuring_applies_once_configured():  # utils/seeds.py:52
    reset_ipu_seed(5)
    _configure()
    first = seeds.generator(0, 0).normal([4]).numpy()
    reset_ipu_seed(5)
    again = seeds.generator(0, 0).normal([4]).numpy()
    np.testing.assert_array_equal(first, again)
    # A later configuration forgets it again.
    _configure()
    assert not np.array_equal(first, seeds.generator(0, 0).normal([4]).numpy())


def test_reset_ipu_seed_out_of_range_ordinal_is_an_internal_error():
    _configure()
    with pytest.raises(tf.errors.InternalError, match="^Invalid ordinal on seed reset: 3"):
        reset_ipu_seed(1, device="/device:IPU:3")


def test_host_allreduce_reads_reduce_op_value():  # F13
    with pytest.raises(AttributeError):
        host_collective_ops.allreduce(tf.constant([1.0]), "SUM")

    class NotAString:
        value = 3

    with pytest.raises(TypeError, match="^Expected string for argument 'reduce_op' not 3."):
        host_collective_ops.allreduce(tf.constant([1.0]), NotAString())


@pytest.mark.parametrize("index", [1.0, "1", None, [0, 1.5]])
def test_ipu_shard_non_integer_index_is_a_type_error(index):  # F19
    with pytest.raises(TypeError):
        with scopes.ipu_shard(index):
            pass


@pytest.mark.parametrize("value, expected", [(None, None), (1, True), ("", False), ([], False)])
def test_accumulation_flags_are_read_by_truthiness(value, expected):  # F22
    sgd = tf.compat.v1.train.GradientDescentOptimizer(0.5)
    optimizer = GradientAccumulationOptimizerV2(
        sgd,
        2,
        offload_weight_update_variables=value,
        replicated_optimizer_state_sharding=False,
    )
    assert optimizer._offload_weight_update_variables is expected  # noqa: SLF001
    sharded = GradientAccumulationOptimizerV2(
        sgd, 2, offload_weight_update_variables=True, replicated_optimizer_state_sharding=value
    )
    assert sharded._replicated_optimizer_state_sharding is expected  # noqa: SLF001


def test_ipu_optimizer_wraps_any_object():  # F24
    class Duck:
        pass

    wrapped = CrossReplicaOptimizer(Duck())
    with pytest.raises(AttributeError):
        wrapped.get_slot_names()
    # A real optimizer still works: one step of SGD on the host.
    var = tf.Variable([1.0, 2.0])
    step = CrossReplicaOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.5))
    step.apply_gradients([(tf.constant([2.0, 4.0]), var)])
    np.testing.assert_allclose(var.numpy(), np.array([1.0, 2.0]) - 0.5 * np.array([2.0, 4.0]))
