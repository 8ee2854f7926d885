"""The IPU InstanceNormalization layer (`ipu.keras.layers.InstanceNormalization`, alias InstanceNorm)."""

from __future__ import annotations

import tf_keras

from openipu._src.keras.layers.group_normalization import GroupNormalization


@tf_keras.utils.register_keras_serializable(package="openipu")
class InstanceNormalization(GroupNormalization):
    """Instance normalisation (https://arxiv.org/abs/1607.08022): one channel per group.

    Trainable beta and gamma, no moving statistics. None initializers mean
    zeros (beta) and ones (gamma).
    """

    def __init__(
        self,
        dtype=None,  # Keras's floatx, as the original's layers (which take it from **kwargs)
        channels_axis: int = -1,
        center: bool = True,
        scale: bool = True,
        epsilon: float = 0.001,
        beta_initializer=None,
        gamma_initializer=None,
        trainable: bool = True,
        name=None,
        **kwargs,
    ) -> None:
        super().__init__(
            dtype=dtype,
            channels_axis=channels_axis,
            center=center,
            scale=scale,
            epsilon=epsilon,
            beta_initializer=beta_initializer,
            gamma_initializer=gamma_initializer,
            trainable=trainable,
            name=name,
            **kwargs,
        )

    def _groups_for(self, channels: int) -> int:
        return channels

    def get_config(self) -> dict:
        return self._normalization_config()


InstanceNorm = InstanceNormalization
