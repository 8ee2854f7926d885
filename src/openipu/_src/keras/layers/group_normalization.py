"""The IPU GroupNormalization layer (`ipu.keras.layers.GroupNormalization`, alias GroupNorm)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.int_like import plain_int
from openipu._src.ops import normalization_ops


@tf_keras.utils.register_keras_serializable(package="openipu")
class GroupNormalization(tf_keras.layers.Layer):
    """Group normalisation (https://arxiv.org/abs/1803.08494) with trainable beta and gamma.

    Statistics are per batch entry and per group of channels; there are no
    moving statistics, so training and inference give the same result. With
    `strided_channel_grouping` (the default, Popnn's layout) channel `c` is in
    group `c % groups`, otherwise in group `c // (channels / groups)` like
    `tf.keras.layers.GroupNormalization`.

    A None initializer means zeros for beta and ones for gamma (the original
    fell through to Keras' glorot_uniform default, which makes the layer start
    as a random affine map; openipu does not reproduce that).
    """

    def __init__(
        self,
        dtype=None,  # Keras's floatx, as the original's layers (which take it from **kwargs)
        groups: int = 2,
        channels_axis: int = -1,
        center: bool = True,
        scale: bool = True,
        epsilon: float = 0.001,
        beta_initializer=None,
        gamma_initializer=None,
        strided_channel_grouping: bool = True,
        trainable: bool = True,
        name=None,
        **kwargs,
    ) -> None:
        super().__init__(dtype=dtype, trainable=trainable, name=name, **kwargs)
        # Checked against the channels when the layer is built, as the original's.
        self.groups = plain_int(groups)
        self.channels_axis = channels_axis
        self.center = center
        self.scale = scale
        self.epsilon = epsilon
        self.beta_initializer = _initializer_or_none(beta_initializer)
        self.gamma_initializer = _initializer_or_none(gamma_initializer)
        self.strided_channel_grouping = strided_channel_grouping

    def _groups_for(self, channels: int) -> int:
        return self.groups

    def build(self, input_shape) -> None:
        what = type(self).__name__
        self._axis, channels = normalization_ops.channel_layout(
            tf.TensorShape(input_shape), self.channels_axis, what
        )
        self._num_groups = normalization_ops.check_groups(
            self._groups_for(channels), channels, what
        )
        self.beta = self.gamma = None
        # Gamma first, then beta: the original's order, which set_weights follows.
        if self.scale:
            self.gamma = self.add_weight(
                "gamma",
                shape=(channels,),
                dtype=self.dtype,
                initializer=self.gamma_initializer or "ones",
                trainable=True,
            )
        if self.center:
            self.beta = self.add_weight(
                "beta",
                shape=(channels,),
                dtype=self.dtype,
                initializer=self.beta_initializer or "zeros",
                trainable=True,
            )
        super().build(input_shape)

    def call(self, inputs, training=None):
        return normalization_ops.normalize_groups(
            inputs,
            self.gamma,
            self.beta,
            self._num_groups,
            self._axis,
            self.epsilon,
            self.strided_channel_grouping,
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def _normalization_config(self) -> dict:
        return {
            **super().get_config(),
            "channels_axis": self.channels_axis,
            "center": self.center,
            "scale": self.scale,
            "epsilon": self.epsilon,
            "beta_initializer": _serialized(self.beta_initializer),
            "gamma_initializer": _serialized(self.gamma_initializer),
        }

    def get_config(self) -> dict:
        return {
            **self._normalization_config(),
            "groups": self.groups,
            "strided_channel_grouping": self.strided_channel_grouping,
        }


GroupNorm = GroupNormalization


def _initializer_or_none(initializer):
    return None if initializer is None else tf_keras.initializers.get(initializer)


def _serialized(initializer):
    return None if initializer is None else tf_keras.initializers.serialize(initializer)
