"""The serialized dense layer (`ipu_tensorflow_addons.keras.layers.SerialDense`)."""

from __future__ import annotations

import numbers
from collections.abc import Callable

import tensorflow as tf
import tf_keras
from tf_keras.constraints import Constraint
from tf_keras.initializers import Initializer
from tf_keras.layers import InputSpec
from tf_keras.regularizers import Regularizer

from openipu._src.addons.keras.layers import serialized_matmul as serial
from openipu._src.int_like import plain_int
from openipu._src.ops.int_argument import as_int


@tf_keras.utils.register_keras_serializable(package="openipu")
class SerialDense(tf_keras.layers.Layer):
    """`activation(inputs @ kernel + bias)` with the matmul split into `serialization_factor` parts.

    For inputs `[..., m, k]` and a kernel `[k, n]`, `serialization_dimension`
    chooses what is split: `input_columns` splits `m` (the batch for 2-D
    inputs), `input_rows_kernel_columns` splits `k` (partial products are
    summed), `kernel_rows` splits `n`. The backward pass is split the same way.
    The numbers are those of `tf_keras.layers.Dense` with the same weights; the
    split only saves memory on the IPU. `input_dim=` means `input_shape=(input_dim,)`.
    """

    def __init__(
        self,
        units: int,
        serialization_factor: int,
        serialization_dimension: str,
        activation=None,
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ) -> None:
        if "input_shape" not in kwargs and "input_dim" in kwargs:
            kwargs["input_shape"] = (kwargs.pop("input_dim"),)
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        # The original takes int() of both (keras/layers/dense.py): 4.0 and "4" work as 4.
        self.units = _positive_int("units", as_int(plain_int(units), "SerialDense: units"))
        serialization_factor = as_int(
            plain_int(serialization_factor), "SerialDense: serialization_factor"
        )
        if serialization_factor < 1:
            raise ValueError(
                "SerialDense: serialization_factor has to be an integer of at least 1, "
                f"got {serialization_factor!r}"
            )
        self.serialization_factor: int = serialization_factor
        if serialization_dimension not in serial.SERIALIZATION_DIMENSIONS:
            raise ValueError(
                f"SerialDense: Invalid serialization_dimension={serialization_dimension!r}, "
                f"expected one of: {', '.join(serial.SERIALIZATION_DIMENSIONS)}"
            )
        self.serialization_dimension: str = serialization_dimension
        self.activation: Callable[[tf.Tensor], tf.Tensor] = tf_keras.activations.get(activation)
        self.use_bias: bool = bool(use_bias)
        self.kernel_initializer: Initializer = tf_keras.initializers.get(kernel_initializer)
        self.bias_initializer: Initializer = tf_keras.initializers.get(bias_initializer)
        self.kernel_regularizer: Regularizer | None = tf_keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer: Regularizer | None = tf_keras.regularizers.get(bias_regularizer)
        self.kernel_constraint: Constraint | None = tf_keras.constraints.get(kernel_constraint)
        self.bias_constraint: Constraint | None = tf_keras.constraints.get(bias_constraint)
        self.supports_masking = True
        self.input_spec: InputSpec | list[InputSpec] = tf_keras.layers.InputSpec(min_ndim=2)

    def build(self, input_shape) -> None:
        dtype = tf.as_dtype(self.dtype or tf_keras.backend.floatx())
        if not dtype.is_floating:
            raise TypeError(
                f"SerialDense: the layer's dtype must be floating point, got {dtype.name}"
            )
        input_shape = tf.TensorShape(input_shape)
        last_dim = input_shape[-1] if input_shape.rank else None
        if last_dim is None:
            raise ValueError(
                "SerialDense: the last dimension of the inputs must be defined, "
                f"got input shape {input_shape}"
            )
        split_sizes = {
            serial.INPUT_ROWS_KERNEL_COLUMNS: ("the last input dimension (k)", last_dim),
            serial.KERNEL_ROWS: ("units (n)", self.units),
        }
        if self.serialization_dimension in split_sizes:
            what, size = split_sizes[self.serialization_dimension]
            self._check_divides(what, size)
        self.input_spec = tf_keras.layers.InputSpec(min_ndim=2, axes={-1: last_dim})
        self.kernel = self.add_weight(
            "kernel",
            shape=[last_dim, self.units],
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
            dtype=self.dtype,
            trainable=True,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                shape=[self.units],
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
                dtype=self.dtype,
                trainable=True,
            )
        super().build(input_shape)

    def call(self, inputs):
        if isinstance(inputs, (tf.SparseTensor, tf.RaggedTensor)):
            raise TypeError(
                f"SerialDense: sparse or ragged inputs are not supported, got {type(inputs).__name__}"
            )
        inputs = tf.cast(inputs, self.compute_dtype)
        if self.serialization_dimension == serial.INPUT_COLUMNS:
            rows = inputs.shape[-2]
            if rows is not None:
                self._check_divides("the second-to-last input dimension (m)", rows)
        outputs = serial.serialized_matmul(
            inputs,
            tf.cast(self.kernel, self.compute_dtype),
            self.serialization_factor,
            self.serialization_dimension,
        )
        if self.bias is not None:
            outputs = tf.nn.bias_add(outputs, tf.cast(self.bias, self.compute_dtype))
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def _check_divides(self, what: str, size: int) -> None:
        if size % self.serialization_factor:
            raise ValueError(
                f"SerialDense: serialization_factor={self.serialization_factor} must divide "
                f"{what} when serialization_dimension={self.serialization_dimension!r}, "
                f"got {size}"
            )

    def compute_output_shape(self, input_shape):
        input_shape = tf.TensorShape(input_shape)
        if input_shape.rank is None or input_shape[-1] is None:
            raise ValueError(
                "SerialDense: the last dimension of the input shape must be defined, "
                f"got {input_shape}"
            )
        return input_shape[:-1].concatenate(self.units)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            "serialization_factor": self.serialization_factor,
            "serialization_dimension": self.serialization_dimension,
            "activation": tf_keras.activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": tf_keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": tf_keras.initializers.serialize(self.bias_initializer),
            "kernel_regularizer": tf_keras.regularizers.serialize(self.kernel_regularizer),
            "bias_regularizer": tf_keras.regularizers.serialize(self.bias_regularizer),
            "activity_regularizer": tf_keras.regularizers.serialize(self.activity_regularizer),
            "kernel_constraint": tf_keras.constraints.serialize(self.kernel_constraint),
            "bias_constraint": tf_keras.constraints.serialize(self.bias_constraint),
        }


def _positive_int(name: str, value) -> int:
    value = plain_int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"SerialDense: {name} must be a positive integer, got {value!r}")
    return int(value)
