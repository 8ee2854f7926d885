"""The RecomputationCheckpoint layer (`ipu.keras.layers.RecomputationCheckpoint`)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="openipu")
class RecomputationCheckpoint(tf_keras.layers.Layer):
    """Marks values that pipelined recomputation should store instead of recompute.

    This only changes what a pipeline stage keeps in memory under
    `RecomputationMode.RecomputeAndBackpropagateInterleaved`; the values, and
    their gradients, are the inputs' own.
    """

    def call(self, inputs, **kwargs):
        return tf.nest.map_structure(tf.identity, inputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        """Keras' base config only: the layer takes no arguments of its own."""
        return super().get_config()
