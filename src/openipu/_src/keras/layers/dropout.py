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
        # The original's hidden argument (saved in its configs): whether the forward op hands
        # its seed to the backward pass. Accepted and kept; the mask is always regenerated.
        ref = kwargs.pop("ref", True)
        if not isinstance(ref, bool):
            raise TypeError(f"Dropout: ref must be a bool, got {ref!r}")
        super().__init__(**kwargs)
        self.ref = ref
        if isinstance(rate, bool) or not isinstance(rate, (int, float, np.floating)):
            raise TypeError(f"Dropout: rate must be a float in [0, 1), got {rate!r}")
        if not 0.0 <= rate < 1.0:
            # The original's text (tensorflow/python/ipu/ops/rand_ops.py `dropout`).
            raise ValueError(f"The rate must be in the range [0, 1), but was {rate}")
        self.rate = float(rate)
        self.noise_shape = None if noise_shape is None else tuple(noise_shape)
        self.seed = None if seed is None else _seed_pair(seed)
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
        if self.rate == 0.0:
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
            "noise_shape": None if self.noise_shape is None else list(self.noise_shape),
            "seed": None if self.seed is None else list(self.seed),
            "ref": self.ref,
        }


def _seed_pair(seed) -> tuple[int, int]:
    values = np.asarray(seed.numpy() if tf.is_tensor(seed) else seed)
    if values.shape != (2,) or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"Dropout: seed must be a pair of 32-bit integers, got {seed!r}")
    return int(values[0]), int(values[1])
