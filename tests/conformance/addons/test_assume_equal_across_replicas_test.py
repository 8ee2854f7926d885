"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/layers/assume_equal_across_replicas_test.py`.

`AssumeEqualAcrossReplicas`: a replicated model whose control flow depends on a
cross-replica value predicts once the layer marks it equal across replicas; the layer
calls `cross_replica_ops.assume_equal_across_replicas` with its `inplace` argument, which
its config keeps.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu

from ipu_tensorflow_addons.keras import layers as ipu_layers


class ConditionalLayer(keras.layers.Layer):
    def call(self, inputs, **kwargs):
        positive = tf.reduce_all(tf.greater(inputs, tf.zeros_like(inputs)))
        return tf.cond(
            positive,
            lambda: ipu.cross_replica_ops.cross_replica_sum(inputs),
            lambda: tf.zeros((2, 4), inputs.dtype),
        )


@pytest.mark.follows("testNoDivergenceWithAssumeEqualLayer")
def test_no_divergence_with_assume_equal_layer():
    config = ipu.config.IPUConfig()
    config.optimizations.maximum_cross_replica_sum_buffer_size = 10000
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    try:
        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():
            inputs = keras.layers.Input(shape=(32), dtype=np.single, batch_size=2)
            x = keras.layers.Dense(
                4, name="layer0", kernel_initializer=keras.initializers.Constant(0.1)
            )(inputs)
            x = ConditionalLayer()(ipu_layers.AssumeEqualAcrossReplicas()(x))
            model = keras.Model(inputs, x)
            model.compile("sgd", loss="mse", steps_per_execution=12)
            result = model.predict(np.full([96, 32], 1.0, np.single), batch_size=2, verbose=0)
    finally:
        ipu.config.reset_ipu_configuration()
    # Each replica's dense output (32 * 0.1 per unit) summed over the 2 replicas.
    np.testing.assert_allclose(result, np.full((96, 4), 2 * 3.2, np.float32), rtol=1e-5)


@pytest.mark.follows("testLayerUsesAssumeEqualOp")
@pytest.mark.parametrize("inplace", [True, False])
def test_layer_uses_assume_equal_op(inplace):
    with tf.Graph().as_default():
        placeholder = tf.compat.v1.placeholder(np.single, 32)
        with mock.patch.object(ipu.ops.cross_replica_ops, "assume_equal_across_replicas") as op:
            ipu_layers.AssumeEqualAcrossReplicas(inplace)(placeholder)
        op.assert_called_with(placeholder, inplace)


@pytest.mark.follows("testGetConfig")
@pytest.mark.parametrize("inplace", [True, False])
def test_get_config(inplace):
    assert ipu_layers.AssumeEqualAcrossReplicas(inplace).get_config()["inplace"] == inplace
