"""The IPU's 8-bit floating point formats, encoded and decoded with TensorFlow ops.

Poplar's `QUARTER` type has two formats, F143 (1 sign, 4 exponent, 3 mantissa
bits, exponent bias 8) and F152 (1 sign, 5 exponent, 2 mantissa bits, bias 16).
Both have no infinities and one NaN, the bit pattern of negative zero (0x80):
they are the formats ml_dtypes calls float8_e4m3fnuz and float8_e5m2fnuz, which
the tests use as the reference. A tensor's metadata byte holds its format
(bit 7 set for F143) and a 6-bit two's complement scale: a value is stored as
`x * 2**-scale` rounded to the format, and read back as `stored * 2**scale`
(tensorflow/python/ipu/ops/f8_ops.py `create_metadata`).

Rounding is to nearest, ties to even. A value beyond the format's largest gives
NaN when the configured floating point behaviour has `nanoo` (NaN on overflow),
else the largest value of its sign, as the IPU's conversions do.

Only TensorFlow ops are used, so the conversions compile into programs.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

NAN_BITS = 0x80
FORMAT_BIT = 0x80
SCALE_BITS = 0x3F


@dataclasses.dataclass(frozen=True)
class Layout:
    """The bit layout of one 8-bit format."""

    exponent_bits: int
    mantissa_bits: int
    bias: int

    @property
    def min_exponent(self) -> int:
        """The exponent of the smallest normal value (that of the subnormals' quantum + mantissa)."""
        return 1 - self.bias

    @property
    def max_value(self) -> float:
        top = (1 << self.exponent_bits) - 1 - self.bias
        return 2.0**top * (2.0 - 2.0**-self.mantissa_bits)


F143 = Layout(exponent_bits=4, mantissa_bits=3, bias=8)
F152 = Layout(exponent_bits=5, mantissa_bits=2, bias=16)


def metadata_byte(is_f143: bool, scale: int) -> int:
    """The metadata of a format and scale (f8_ops.py `create_metadata`)."""
    return (FORMAT_BIT if is_f143 else 0) | (scale & SCALE_BITS)


def _scale_of(metadata: tf.Tensor) -> tf.Tensor:
    """The signed scale held in the low six bits of `metadata` (uint8), as int32."""
    scale = tf.bitwise.bitwise_and(tf.cast(metadata, tf.int32), SCALE_BITS)
    return tf.where(scale >= 32, scale - 64, scale)


def _is_f143(metadata: tf.Tensor) -> tf.Tensor:
    return tf.not_equal(tf.bitwise.bitwise_and(tf.cast(metadata, tf.int32), FORMAT_BIT), 0)


def _exponent_of(values: tf.Tensor) -> tf.Tensor:
    """floor(log2(|values|)) of positive normal float32 values, exactly (from their bits)."""
    bits = tf.bitcast(values, tf.int32)
    return tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits, 23), 0xFF) - 127


def _encode(values: tf.Tensor, layout: Layout, nan_on_overflow: bool) -> tf.Tensor:
    """float32 `values` (already divided by 2**scale) as the bits of `layout`, int32."""
    magnitude = tf.abs(values)
    # The quantum of each value's binade; subnormals share the smallest binade's quantum.
    tiny = tf.constant(2.0**layout.min_exponent, tf.float32)
    exponent = _exponent_of(tf.maximum(magnitude, tiny))
    quantum = tf.pow(2.0, tf.cast(exponent - layout.mantissa_bits, tf.float32))
    rounded = tf.round(magnitude / quantum) * quantum  # tf.round: ties to even
    overflow = rounded > layout.max_value
    rounded = tf.minimum(rounded, layout.max_value)
    # Rounding may carry into the next binade: take the exponent again.
    exponent = _exponent_of(tf.maximum(rounded, tiny))
    normal = rounded >= tiny
    field = tf.where(normal, exponent + layout.bias, 0)
    fraction = tf.where(
        normal,
        rounded / tf.pow(2.0, tf.cast(exponent, tf.float32)) - 1.0,
        rounded / tiny,
    )
    mantissa = tf.cast(tf.round(fraction * 2.0**layout.mantissa_bits), tf.int32)
    bits = tf.bitwise.bitwise_or(tf.bitwise.left_shift(field, layout.mantissa_bits), mantissa)
    # tf.equal/tf.not_equal, not ==/!=: in a TF1 graph those compare identity.
    negative = (values < 0) & tf.not_equal(bits, 0)  # no negative zero: its pattern is NaN
    bits = tf.where(negative, tf.bitwise.bitwise_or(bits, 0x80), bits)
    invalid = tf.math.is_nan(values)
    if nan_on_overflow:
        invalid |= overflow
    return tf.where(invalid, NAN_BITS, bits)


def _decode(bits: tf.Tensor, layout: Layout) -> tf.Tensor:
    """The float32 values of `layout`'s `bits` (int32)."""
    mantissa_mask = (1 << layout.mantissa_bits) - 1
    exponent_mask = (1 << layout.exponent_bits) - 1
    field = tf.bitwise.bitwise_and(
        tf.bitwise.right_shift(bits, layout.mantissa_bits), exponent_mask
    )
    mantissa = tf.cast(tf.bitwise.bitwise_and(bits, mantissa_mask), tf.float32)
    fraction = mantissa / 2.0**layout.mantissa_bits
    magnitude = tf.where(
        tf.equal(field, 0),
        fraction * 2.0**layout.min_exponent,
        (1.0 + fraction) * tf.pow(2.0, tf.cast(field - layout.bias, tf.float32)),
    )
    negative = tf.not_equal(tf.bitwise.bitwise_and(bits, 0x80), 0)
    values = tf.where(negative, -magnitude, magnitude)
    return tf.where(tf.equal(bits, NAN_BITS), tf.constant(float("nan"), tf.float32), values)


def to_f8_bits(values: tf.Tensor, metadata: tf.Tensor, nan_on_overflow: bool) -> tf.Tensor:
    """`values` rounded to the format and scale of `metadata` (uint8 scalar), as uint8 bits."""
    scaled = tf.cast(values, tf.float32) * tf.pow(2.0, -tf.cast(_scale_of(metadata), tf.float32))
    bits = tf.where(
        _is_f143(metadata),
        _encode(scaled, F143, nan_on_overflow),
        _encode(scaled, F152, nan_on_overflow),
    )
    return tf.cast(bits, tf.uint8)


def from_f8_bits(bits: tf.Tensor, metadata: tf.Tensor) -> tf.Tensor:
    """The float32 values of uint8 `bits` in the format and scale of `metadata`."""
    bits = tf.cast(bits, tf.int32)
    values = tf.where(_is_f143(metadata), _decode(bits, F143), _decode(bits, F152))
    return values * tf.pow(2.0, tf.cast(_scale_of(metadata), tf.float32))
