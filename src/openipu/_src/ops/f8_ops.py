"""FP8 operators (`ipu.ops.f8_ops`): quarter tensors, conversions, matmul and convolutions.

As tensorflow/python/ipu/ops/f8_ops.py: a `QuarterTensor` is uint8 data (the
8-bit patterns) with a uint8 metadata byte (format and scale, see
`f8_numerics`). The matmul and convolutions read FP8 operands at their exact
values and return float16, as the IPU's FP8 units do; the host accumulates in
float32 before that rounding.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import tensorflow as tf

from openipu._src.ops import f8_numerics
from openipu._src.system import configure


class Format(IntEnum):
    """The bit layout of an FP8 type: F143 has 1 sign, 4 exponent and 3 mantissa bits,
    F152 1 sign, 5 exponent and 2 mantissa bits."""

    F143 = 0
    F152 = 1


def create_metadata(fmt, scale=0) -> int:
    """The metadata byte of format `fmt` and scale `scale` (a 6-bit signed int)."""
    return f8_numerics.metadata_byte(fmt == Format.F143, scale)


class QuarterTensor:
    """A tensor of FP8 values: uint8 `data` and its `metadata`."""

    def __init__(self, data, metadata) -> None:
        self.data = self._maybe_get_tf_variable(data)
        self.metadata = self._maybe_get_tf_variable(metadata)

    def _maybe_get_tf_variable(self, data):
        if isinstance(data, (np.ndarray, int)):
            data = tf.convert_to_tensor(data, dtype=tf.uint8)
        if data.dtype != "uint8":
            raise TypeError(
                "Trying to set/update QuarterTensor data with a tensor of type "
                f"{data.dtype}, but only uint8 are supported. Check that data "
                "is a value returned by `convert_to_f8`"
            )
        return data

    def numpy(self) -> list:
        """`[data, metadata]` as numpy values."""
        return [self.data.numpy(), self.metadata.numpy()]

    def assign(self, new_values, **kwargs) -> None:
        """Sets the data and metadata from `[data, metadata]` (the output of `numpy()`)."""
        del kwargs
        self.data = self._maybe_get_tf_variable(new_values[0])
        self.metadata = self._maybe_get_tf_variable(new_values[1])

    def __repr__(self) -> str:
        return f"QuarterTensor(data={self.data}, metadata={self.metadata})"

    def __eq__(self, other) -> bool:
        return self.numpy() == other.numpy()

    __hash__ = None  # type: ignore[assignment]  # equality compares values, as in the original

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return tf.uint8

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]

    def __iter__(self):
        return iter([self.data, self.metadata])


def _nan_on_overflow() -> bool:
    """Whether the configured floating point behaviour turns overflows into NaN."""
    system = configure.maybe_current_system()
    if system is None:
        return False
    behaviour = system.config.floating_point_behaviour
    return bool(behaviour.nanoo or behaviour.set_all)


def convert_to_f8(values, metadata, name=None) -> QuarterTensor:
    """`values` rounded to FP8 in the format and scale of `metadata`.

    The values pass through float16 first, as in the original.
    """
    with tf.name_scope(name or "convert_to_f8"):
        values = tf.convert_to_tensor(values)
        if values.dtype != tf.float16:
            values = tf.cast(values, tf.float16)
        metadata = tf.convert_to_tensor(metadata, dtype=tf.uint8)
        data = f8_numerics.to_f8_bits(values, metadata, _nan_on_overflow())
        return QuarterTensor(data, metadata)


def convert_from_f8(packed_input, dtype=tf.half, name=None) -> tf.Tensor:
    """The values of `packed_input` (a QuarterTensor or `(data, metadata)`) as `dtype`.

    They are read as float16, then cast to `dtype` when it differs.
    """
    values, metadata = packed_input
    with tf.name_scope(name or "convert_from_f8"):
        metadata = tf.convert_to_tensor(metadata, dtype=tf.uint8)
        result = tf.cast(f8_numerics.from_f8_bits(values, metadata), tf.float16)
        if result.dtype != dtype:
            result = tf.cast(result, dtype)
        return result


def _operand(value, expected_rank: int) -> tf.Tensor:
    """An FP8 operand's float32 values, with a group dimension added to matrices.

    Plain tensors go with metadata 0 as in the original (`canonicalise_input`): uint8
    data are F152 patterns of scale 0, other dtypes their own values.
    """
    if isinstance(value, QuarterTensor):
        data, metadata = value.data, value.metadata
    else:
        data, metadata = tf.convert_to_tensor(value), tf.constant(0, tf.uint8)
    if not data.shape.is_fully_defined():
        raise Exception(f"Input shape must be fully defined: {data}")  # noqa: TRY002 - the original's
    if data.dtype == tf.uint8:
        values = f8_numerics.from_f8_bits(data, metadata)
    else:
        values = tf.cast(data, tf.float32)
    if values.shape.rank == 2 and expected_rank == 3:
        values = values[None]
    values.shape.assert_has_rank(expected_rank)
    return values


def _data_rank(value) -> int:
    return (
        value.data if isinstance(value, QuarterTensor) else tf.convert_to_tensor(value)
    ).shape.rank


def f8_matmul(lhs, rhs, name="f8_matmul") -> tf.Tensor:
    """`lhs @ rhs` of FP8 (or plain) operands, grouped when they have rank 3; float16."""
    with tf.name_scope(name):
        product = tf.matmul(_operand(lhs, 3), _operand(rhs, 3))
        if _data_rank(lhs) == 2:
            product = product[0]
        return tf.cast(product, tf.float16)


def _convolution(convolve, rank: int, inputs, filters, window: tuple, name: str) -> tf.Tensor:
    """`convolve` (a tf.nn convolution, given `window` = (strides, padding, data_format,
    dilations) positionally) of FP8 (or plain) operands of `rank`; float16."""
    with tf.name_scope(name):
        result = convolve(_operand(inputs, rank), _operand(filters, rank), *window)
        return tf.cast(result, tf.float16)


def f8_conv_1d(
    inputs, filters, strides, padding, data_format="NWC", dilations=(1,), name="f8_conv_1d"
) -> tf.Tensor:
    """A 1D convolution of FP8 (or plain) operands, as `tf.nn.conv1d`; float16."""
    if data_format not in ("NWC", "NCW"):
        raise ValueError(
            f"`data_format` must be 'NWC' or 'NCW'. Received: data_format={data_format}"
        )
    window = (strides, padding, data_format, dilations)
    return _convolution(tf.nn.conv1d, 3, inputs, filters, window, name)


def f8_conv_2d(
    inputs, filters, strides, padding, data_format="NHWC", dilations=(1, 1, 1, 1), name="f8_conv_2d"
) -> tf.Tensor:
    """A 2D convolution of FP8 (or plain) operands, as `tf.nn.conv2d`; float16."""
    window = (strides, padding, data_format, dilations)
    return _convolution(tf.nn.conv2d, 4, inputs, filters, window, name)


def f8_conv_3d(
    inputs,
    filters,
    strides,
    padding,
    data_format="NDHWC",
    dilations=(1, 1, 1, 1, 1),
    name="f8_conv_3d",
) -> tf.Tensor:
    """A 3D convolution of FP8 (or plain) operands, as `tf.nn.conv3d`; float16."""
    window = (strides, padding, data_format, dilations)
    return _convolution(tf.nn.conv3d, 5, inputs, filters, window, name)
