"""The IPU Dropout layer (`ipu.keras.layers.Dropout`)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras

from openipu._src.ops import rand_ops
from openipu._src.system import seeds


@tf_keras.utils.register_keras_serializable(package="openipu")
class Dropout(tf_keras.layers.Layer):
    """Dropout on the IPU's random number generator.

    In training, zeroes inputs with probability `rate` and scales the others by
    1 / (1 - rate); in inference, returns the inputs. `seed` (a pair of int32)
    makes the mask deterministic; without it the mask comes from the emulated
    IPU's generator (`utils.reset_ipu_seed`). The backward pass regenerates the
    mask from its seed rather than storing it.
    """

    def __init__(self, rate: float, noise_shape=None, seed=None, **kwargs) -> None:
        # As the original (ipu_tensorflow_addons/keras/layers/dropout.py): the arguments are
        # kept as given and checked by the dropout op when the layer drops (its `rate` and
        # `seed` errors). `ref` is the original's hidden argument (saved in its configs):
        # whether the forward op hands its seed to the backward pass; kept, as the mask is
        # always regenerated here.
        self.ref = kwargs.pop("ref", True)
        super().__init__(**kwargs)
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed
        self.supports_masking = True

    def build(self, input_shape) -> None:
        if self.seed is None:
            # Saved functions capture the device's seed state: keep it reachable from the
            # layer (for SavedModel) without making it a weight of the layer.
            holder = tf.__internal__.tracking.AutoTrackable()
            holder.state = seeds.generator(device_ordinal=0, replica=0).state
            self._ipu_seed_stream = holder
        super().build(input_shape)

    def call(self, inputs, training=None):
        if training is None:
            training = tf_keras.backend.learning_phase()
        if isinstance(self.rate, (int, float)) and self.rate == 0.0:
            return tf.identity(inputs)

        def dropped():
            return rand_ops.dropout(
                inputs, rate=self.rate, noise_shape=self.noise_shape, seed=self.seed
            )

        return tf.__internal__.smart_cond.smart_cond(training, dropped, lambda: tf.identity(inputs))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "rate": self.rate,
            "noise_shape": _as_config(self.noise_shape),
            "seed": _as_config(self.seed),
            "ref": self.ref,
        }


def _as_config(value):
    """A shape or seed as a config holds it: a list (or None)."""
    if value is None:
        return None
    if tf.is_tensor(value):
        value = value.numpy()
    return np.asarray(value).tolist()
