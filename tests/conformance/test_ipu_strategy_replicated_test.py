"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/ipu_strategy_replicated_test.py`.

IPUStrategy on 2 replicas: `all_reduce` of the replica index in replica context (SUM 1,
MEAN 0.5), and a Keras SGD step whose gradients are each replica's infeed element:
the optimizer sums the replicas' gradients (it does not average them).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _configure_two_replicas():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.device_connection.enable_remote_buffers = True
    config.device_connection.type = ipu.utils.DeviceConnectionType.ON_DEMAND
    config.configure_ipu_system()
    return ipu.ipu_strategy.IPUStrategyV1()


@pytest.fixture
def strategy():
    yield _configure_two_replicas()
    ipu.config.reset_ipu_configuration()


def _all_reduce(reduce_op):
    @tf.function(jit_compile=True)
    def all_reduce_function():
        x = tf.cast(ipu.replication_ops.replication_index(), np.float32)
        return tf.distribute.get_replica_context().all_reduce(reduce_op, x)

    return all_reduce_function


@pytest.mark.follows("test_all_reduce")
def test_all_reduce(strategy):
    with strategy.scope():
        assert strategy.run(_all_reduce(tf.distribute.ReduceOp.SUM)).numpy() == 1.0
        assert strategy.run(_all_reduce(tf.distribute.ReduceOp.MEAN)).numpy() == 0.5


@pytest.mark.follows("test_optimizer")
def test_optimizer(strategy):
    data = [1.0, 2.0]
    learning_rate, iterations = 0.5, 3
    with strategy.scope():
        variable = tf.Variable(2.0)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
            tf.data.Dataset.from_tensor_slices(data).repeat(iterations)
        )
        optimizer = tf.keras.optimizers.SGD(learning_rate)

        @tf.function(jit_compile=True)
        def apply_gradient():
            optimizer.apply_gradients([(infeed._dequeue(), variable)])

        infeed.initializer  # noqa: B018 - as the original
        expected = 2.0
        for _ in range(iterations):
            strategy.run(apply_gradient)
            expected -= learning_rate * np.sum(data)  # the replicas' gradients summed
            assert variable.numpy() == expected
