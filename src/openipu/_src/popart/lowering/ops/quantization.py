"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear."""

from __future__ import annotations

import ml_dtypes
import tensorflow as tf

from openipu._src.popart.lowering.dtypes import ONNX_TO_TF, is_narrow
from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.ops.cast import cast_to
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import normalize_axis


def integer_limits(dtype: tf.DType) -> tuple[float, float] | None:
    if dtype.is_integer:
        return float(dtype.min), float(dtype.max)
    if is_narrow(dtype) and dtype.name in ("int4", "uint4", "int2", "uint2"):
        info = ml_dtypes.iinfo(dtype.as_numpy_dtype)
        return float(info.min), float(info.max)
    return None


def broadcast_parameter(op: Op, parameter: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """A scale or zero point shaped to broadcast against ``x`` (per-tensor, per-axis or blocked)."""
    if (
        parameter.shape.rank == 0
        or parameter.shape.num_elements() == 1
        and parameter.shape.rank <= 1
    ):
        return tf.reshape(parameter, [])
    rank = x.shape.rank
    axis = normalize_axis(op.attrs.get("axis", 1) if op.attrs.get("axis") is not None else 1, rank)
    block_size = op.attrs.get("block_size") or 0
    if block_size:
        parameter = tf.repeat(parameter, block_size, axis=axis)
        parameter = parameter[tuple(slice(0, x.shape[i]) for i in range(rank))]
        return parameter
    shape = [1] * rank
    shape[axis] = -1
    return tf.reshape(parameter, shape)


@register_op("DequantizeLinear", since=(10, 13, 19, 21, 23, 24, 25))
class DequantizeLinear(Op):
    def compute(
        self, x: tf.Tensor, scale: tf.Tensor, zero_point: tf.Tensor | None = None
    ) -> tf.Tensor:
        values = cast_to(x, tf.float32) if x.dtype != tf.int32 else tf.cast(x, tf.float32)
        scale_values = tf.cast(broadcast_parameter(self, scale, x), tf.float32)
        if zero_point is not None:
            values = values - cast_to(broadcast_parameter(self, zero_point, x), tf.float32)
        output_dtype = self.attrs.get("output_dtype")
        dtype = ONNX_TO_TF[output_dtype] if output_dtype else scale.dtype
        return tf.cast(values * scale_values, dtype)


@register_op("QuantizeLinear", since=(10, 13, 19, 21, 23, 24, 25))
class QuantizeLinear(Op):
    def compute(
        self, x: tf.Tensor, scale: tf.Tensor, zero_point: tf.Tensor | None = None
    ) -> tf.Tensor:
        output_dtype = self.attrs.get("output_dtype")
        if zero_point is not None:
            dtype = zero_point.dtype
        elif output_dtype:
            dtype = ONNX_TO_TF[output_dtype]
        else:
            dtype = tf.uint8
        scaled = tf.cast(x, tf.float32) / tf.cast(broadcast_parameter(self, scale, x), tf.float32)
        limits = integer_limits(dtype)
        if limits is None:  # a float8 target: no rounding, saturating cast
            if zero_point is not None:
                scaled = scaled + cast_to(broadcast_parameter(self, zero_point, x), tf.float32)
            return cast_to(scaled, dtype, bool(self.attrs.get("saturate", 1)))
        quantized = tf.round(scaled)  # half to even
        if zero_point is not None:
            quantized = quantized + cast_to(broadcast_parameter(self, zero_point, x), tf.float32)
        quantized = tf.clip_by_value(quantized, *limits)
        return cast_to(quantized, dtype)


@register_op("DynamicQuantizeLinear", since=11)
class DynamicQuantizeLinear(Op):
    def compute(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        low = tf.minimum(tf.reduce_min(x), 0.0)
        high = tf.maximum(tf.reduce_max(x), 0.0)
        scale = (high - low) / 255.0
        zero_point = tf.clip_by_value(tf.round(-low / scale), 0, 255)
        quantized = tf.clip_by_value(tf.round(x / scale) + zero_point, 0, 255)
        return tf.cast(quantized, tf.uint8), scale, tf.cast(zero_point, tf.uint8)


def requantize(
    accumulated: tf.Tensor,
    scale: tf.Tensor,
    y_scale: tf.Tensor,
    y_zero_point: tf.Tensor | None,
    dtype: tf.DType,
) -> tf.Tensor:
    """QLinear* outputs: an integer accumulator rescaled by ``scale / y_scale`` (computed in the
    scales' own type, as the spec's reference does), shifted by the output zero point, rounded
    half to even and saturated to ``dtype``."""
    factor = tf.cast(scale / tf.cast(y_scale, scale.dtype), tf.float64)
    y = tf.cast(accumulated, tf.float64) * factor
    if y_zero_point is not None:
        y = y + tf.cast(y_zero_point, tf.float64)
    low, high = integer_limits(dtype) or (float(dtype.min), float(dtype.max))
    return tf.cast(tf.clip_by_value(tf.round(y), low, high), dtype)
