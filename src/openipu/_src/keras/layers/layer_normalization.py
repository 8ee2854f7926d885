"""The IPU LayerNormalization layer (`ipu.keras.layers.LayerNormalization`, alias LayerNorm)."""

from __future__ import annotations

import numbers

import tensorflow as tf
import tf_keras

from openipu._src.keras.layers.unsupported_arguments import refuse_unsupported


@tf_keras.utils.register_keras_serializable(package="openipu")
class LayerNormalization(tf_keras.layers.Layer):
    """Layer normalisation (https://arxiv.org/abs/1607.06450) over `axis`, with beta and gamma.

    The numbers are those of `tf.keras.layers.LayerNormalization`. As in the
    original (ipu_tensorflow_addons/keras/layers/normalization.py), gamma and beta
    (created in that order) have the dimensions of `axis` in the order given, which
    is Keras' shape, so the weights of either layer load into the other.
    """

    def __init__(
        self,
        dtype=None,  # Keras's floatx, as the original's layers (which take it from **kwargs)
        axis=-1,
        epsilon: float = 0.001,
        center: bool = True,
        scale: bool = True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        trainable: bool = True,
        name=None,
        **kwargs,
    ) -> None:
        # In the original's order (ipu_tensorflow_addons/keras/layers/normalization.py): the
        # axis, then Keras' arguments, then the unsupported ones.
        if not isinstance(axis, (list, tuple, int)):
            # The original's words.
            raise ValueError(
                "Expected an int or a list/tuple of ints for the argument 'axis', but received "
                f"instead: {axis}"
            )
        super().__init__(dtype=dtype, trainable=trainable, name=name, **kwargs)
        unsupported = {
            "beta_regularizer": beta_regularizer,
            "gamma_regularizer": gamma_regularizer,
            "beta_constraint": beta_constraint,
            "gamma_constraint": gamma_constraint,
        }
        refuse_unsupported(self, unsupported)
        self.axis: int | tuple[int, ...] = tuple(axis) if isinstance(axis, (list, tuple)) else axis
        self.epsilon = epsilon
        self.center = center
        self.scale = scale
        self.beta_initializer = tf_keras.initializers.get(beta_initializer)
        self.gamma_initializer = tf_keras.initializers.get(gamma_initializer)

    def build(self, input_shape) -> None:
        input_shape = tf.TensorShape(input_shape)
        rank = input_shape.rank
        if rank is None:
            raise ValueError(f"Input shape {input_shape} has undefined rank.")
        axes = self.axis if isinstance(self.axis, tuple) else (self.axis,)
        # The original indexes shapes with the entries: NumPy integers work as ints.
        axes = tuple(int(a) if isinstance(a, numbers.Integral) else a for a in axes)
        for axis in axes:
            if not isinstance(axis, int) or not -rank <= axis < rank:
                raise ValueError(f"Invalid axis: {axis} (for inputs of rank {rank})")
        self._axes = sorted(a % rank for a in axes)
        if len(set(self._axes)) != len(self._axes):
            raise ValueError(f"Duplicate axis: {tuple(self._axes)}")
        dims = [input_shape[a] for a in self._axes]
        if any(d is None for d in dims):
            raise ValueError(
                f"Input shape {input_shape} has unknown dimensions - all dimensions need to be "
                "fully specified."
            )
        self._param_broadcast = [input_shape[a] if a in self._axes else 1 for a in range(rank)]
        given = [a % rank for a in axes]
        params_shape = tuple(input_shape[a] for a in given)
        # From the order given to the inputs' order, before broadcasting.
        self._param_permutation = sorted(range(len(given)), key=given.__getitem__)
        self.beta = self.gamma = None
        if self.scale:
            self.gamma = self.add_weight(
                "gamma", shape=params_shape, dtype=self.dtype, initializer=self.gamma_initializer
            )
        if self.center:
            self.beta = self.add_weight(
                "beta", shape=params_shape, dtype=self.dtype, initializer=self.beta_initializer
            )
        super().build(input_shape)

    def call(self, inputs, training=None):
        # As the original's, which flattens the kept dimensions to one (a batch of None
        # fails: IPU programs, whose Keras steps have static shapes, never see one).
        kept = [d for a, d in enumerate(inputs.shape) if a not in self._axes]
        if any(d is None for d in kept):
            raise ValueError(
                f"Input shape {inputs.shape} has unknown dimensions - all dimensions need to be "
                "fully specified."
            )
        compute_dtype = tf.float32 if inputs.dtype in (tf.float16, tf.bfloat16) else inputs.dtype
        values = tf.cast(inputs, compute_dtype)
        mean, variance = tf.nn.moments(values, axes=self._axes, keepdims=True)
        normalized = (values - mean) * tf.math.rsqrt(variance + self.epsilon)
        if self.gamma is not None:
            normalized *= self._broadcast(self.gamma, compute_dtype)
        if self.beta is not None:
            normalized += self._broadcast(self.beta, compute_dtype)
        return tf.cast(normalized, inputs.dtype)

    def _broadcast(self, parameter, dtype):
        ordered = tf.transpose(tf.cast(parameter, dtype), self._param_permutation)
        return tf.reshape(ordered, self._param_broadcast)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "axis": list(self.axis) if isinstance(self.axis, tuple) else self.axis,
            "epsilon": self.epsilon,
            "center": self.center,
            "scale": self.scale,
            "beta_initializer": tf_keras.initializers.serialize(self.beta_initializer),
            "gamma_initializer": tf_keras.initializers.serialize(self.gamma_initializer),
        }


LayerNorm = LayerNormalization
