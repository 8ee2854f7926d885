"""The addons' `Dense` layer: Keras's Dense, or an FP8 matmul when given FP8 inputs
(`ipu_tensorflow_addons.keras.layers.Dense`; ipu_tensorflow_addons/keras/layers/dense.py).

Given the `[data, metadata]` list a `ConvertToF8` layer returns, the layer keeps its
kernel in FP8 too (uint8 data and metadata weights) with a float16 bias, and multiplies
with `f8_matmul`. Given a tensor, it is Keras's Dense. Its weights are built at the first
call, when the kind of input is known.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras

from openipu._src.ops.f8_ops import Format, QuarterTensor, create_metadata, f8_matmul

#: The FP8 bit pattern of the error value, which random kernels avoid.
_F8_ERROR = 0x80


class Dense(tf_keras.layers.Dense):
    """Keras's Dense, with FP8 kernels for FP8 inputs (see the module docstring)."""

    def __init__(
        self,
        units,
        kernel_format=Format.F143,
        kernel_scale=0,
        kernel_data_initializer=None,
        **kwargs,
    ) -> None:
        if not -32 <= kernel_scale <= 31:
            raise ValueError(
                "`kernel_scale` should be in the range [-32, 31]. "
                f"The passed scale was {kernel_scale}."
            )
        self._initialised_weights = False
        self.kernel_format = kernel_format
        self.kernel_scale = kernel_scale
        self.kernel_data_initializer = kernel_data_initializer
        super().__init__(units, **kwargs)
        self.input_spec = None  # depends on the kind of input

    def build(self, input_shape):
        # The weights wait for the first call; only the checks of Keras's Dense run here.
        dtype = tf.as_dtype(self.dtype or tf_keras.backend.floatx())
        if not (dtype.is_floating or dtype.is_complex):
            raise TypeError(f"Unable to build `Dense` layer with non-floating point dtype {dtype}")
        if isinstance(input_shape, list):
            return
        last_dim = tf.TensorShape(input_shape)[-1]
        if last_dim is None:
            raise ValueError(
                "The last dimension of the inputs to `Dense` should be defined. Found `None`."
            )
        self.input_spec = tf_keras.layers.InputSpec(min_ndim=2, axes={-1: last_dim})
        self.built = True

    def call(self, inputs):
        if not isinstance(inputs, list):
            if not self._initialised_weights:
                super().build(inputs.shape)
                self._initialised_weights = True
            return super().call(inputs)
        quarter = QuarterTensor(*inputs)
        if not self._initialised_weights:
            self._build_f8_weights(quarter.data.shape[-1])
        outputs = f8_matmul(lhs=quarter, rhs=QuarterTensor(self.kernel_data, self.kernel_metadata))
        if self.use_bias:
            outputs = tf.nn.bias_add(outputs, self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def _build_f8_weights(self, last_dim: int) -> None:
        initializer = self.kernel_data_initializer
        if not initializer:
            data = np.random.randint(0, 256, [last_dim, self.units])
            data[data == _F8_ERROR] = 0
            initializer = tf_keras.initializers.Constant(data)
        self.kernel_data = self.add_weight(
            "kernel_data", shape=[last_dim, self.units], initializer=initializer, dtype="uint8"
        )
        self.kernel_metadata = self.add_weight(
            "kernel_metadata",
            shape=[],
            dtype="uint8",
            initializer=tf_keras.initializers.Constant(
                create_metadata(self.kernel_format, self.kernel_scale)
            ),
        )
        self.bias = (
            self.add_weight(
                "bias",
                shape=[self.units],
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
                dtype="float16",  # the bias of an FP8 matmul is float16
            )
            if self.use_bias
            else None
        )
        self._initialised_weights = True

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "kernel_format": self.kernel_format,
            "kernel_scale": self.kernel_scale,
        }
