"""The IPU Embedding layer (`ipu.keras.layers.Embedding`)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.int_like import plain_int
from openipu._src.keras.layers.unsupported_arguments import refuse_unsupported
from openipu._src.ops import embedding_ops


@tf_keras.utils.register_keras_serializable(package="openipu")
class Embedding(tf_keras.layers.Layer):
    """Embedding lookup through `embedding_ops.embedding_lookup`.

    Input `(batch_size, input_length)` integers, output `(batch_size,
    input_length, output_dim)`. `serialization_factor` splits the lookup
    along the vocabulary (same numbers, less memory on the IPU); ids outside
    the vocabulary then give zero rows.
    """

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        embeddings_initializer="uniform",
        embeddings_regularizer=None,
        activity_regularizer=None,
        embeddings_constraint=None,
        mask_zero: bool = False,
        input_length=None,
        serialization_factor: int = 1,
        **kwargs,
    ) -> None:
        unsupported = {
            "embeddings_regularizer": embeddings_regularizer,
            "activity_regularizer": activity_regularizer,
            "embeddings_constraint": embeddings_constraint,
            "mask_zero": mask_zero,
            "input_length": input_length,
        }
        # The ids are integers: never cast them to the layer's float dtype.
        kwargs["autocast"] = False
        super().__init__(**kwargs)
        embeddings_initializer = tf_keras.initializers.get(embeddings_initializer)
        # After Keras' arguments and the initializer, as in the original
        # (ipu_tensorflow_addons/keras/layers/embedding_lookup.py).
        refuse_unsupported(self, unsupported)
        # Kept as given, as the original: the weight's shape and the lookup
        # (embedding_ops.embedding_lookup) refuse what they cannot take.
        input_dim, output_dim = plain_int(input_dim), plain_int(output_dim)
        serialization_factor = plain_int(serialization_factor)
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.embeddings_initializer = embeddings_initializer
        self.serialization_factor = serialization_factor

    def build(self, input_shape) -> None:
        input_shape = tf.TensorShape(input_shape)
        if input_shape.rank != 2:
            # The original's text (ipu_tensorflow_addons/keras/layers/embedding_lookup.py).
            raise ValueError(
                "The input shape should be a tensor of shape [batch, input_length], "
                f"got shape {input_shape}"
            )
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.input_dim, self.output_dim),
            initializer=self.embeddings_initializer,
            dtype=self.dtype,
            trainable=True,
        )
        super().build(input_shape)

    def call(self, inputs, inputs_are_sorted=False, training=None):
        # `inputs_are_sorted` only lets Poplar plan a lookup of sorted ids; the result is the
        # same (ipu_tensorflow_addons/keras/layers/embedding_lookup.py `call`).
        del inputs_are_sorted, training
        return embedding_ops.embedding_lookup(
            self.embeddings, inputs, serialization_factor=self.serialization_factor
        )

    def compute_output_shape(self, input_shape):
        return tf.TensorShape(input_shape).concatenate([self.output_dim])

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("autocast", None)
        return {
            **config,
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "embeddings_initializer": tf_keras.initializers.serialize(self.embeddings_initializer),
            "serialization_factor": self.serialization_factor,
        }
