"""Type conversions: Cast, CastLike, BitCast."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import tensorflow as tf
from onnx import TensorProto

from openipu._src.popart.lowering.dtypes import ONNX_TO_TF, is_narrow
from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import to_numpy_function

_FLOAT8_WITH_INFINITY = {tf.dtypes.experimental.float8_e5m2}


def _saturating_numpy_cast(array: np.ndarray, target: np.dtype) -> np.ndarray:
    """Cast to a narrow float type, clamping out-of-range finite values (and infinities)."""
    limit = float(ml_dtypes.finfo(target).max)
    values = array.astype(np.float32)
    values = np.where(np.isnan(values), values, np.clip(values, -limit, limit))
    return values.astype(target)


def _string_to_number(x: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    if dtype.is_floating:
        # ONNX accepts "INF", "-INF", "NaN" spellings, which tf.strings.to_number also reads.
        return tf.cast(tf.strings.to_number(x, tf.float64), dtype)
    if dtype == tf.bool:
        return tf.strings.to_number(x, tf.float64) != 0
    return tf.cast(tf.strings.to_number(x, tf.int64), dtype)


def _number_to_string(x: tf.Tensor) -> tf.Tensor:
    def format_array(array: np.ndarray) -> np.ndarray:
        if (
            array.dtype.kind == "f"
            or array.dtype.kind == "V"
            or is_narrow(tf.as_dtype(array.dtype))
        ):
            formatted = [_format_float(float(value)) for value in array.reshape(-1)]
        else:
            formatted = [str(value) for value in array.reshape(-1)]
        return np.array(formatted, dtype=object).reshape(array.shape).astype(bytes)

    return to_numpy_function(format_array, [x], [tf.string])[0]


def _format_float(value: float) -> str:
    # numpy's shortest repr, with ONNX's spellings of the special values.
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "INF" if value > 0 else "-INF"
    return str(np.float32(value))


def cast_to(x: tf.Tensor, dtype: tf.DType, saturate: bool = True) -> tf.Tensor:
    if x.dtype == dtype:
        return tf.identity(x)
    if x.dtype == tf.string:
        return _string_to_number(x, dtype)
    if dtype == tf.string:
        return _number_to_string(x)
    if is_narrow(x.dtype) or is_narrow(dtype):
        target = np.dtype(dtype.as_numpy_dtype)

        def convert(array: np.ndarray) -> np.ndarray:
            if target.kind == "V" or target.name.startswith("float"):
                if saturate and dtype.name.startswith("float8"):
                    return _saturating_numpy_cast(array, target)
                return array.astype(np.float32).astype(target)
            if array.dtype.kind in "iub":
                return array.astype(target)
            return array.astype(np.float32).astype(target)

        return to_numpy_function(convert, [x], [dtype])[0]
    if x.dtype.is_floating and dtype.is_integer:
        # Out-of-range float -> int conversions are undefined in ONNX; truncate like C.
        return tf.cast(x, dtype)
    return tf.cast(x, dtype)


class CastOp(Op):
    def uses_strings_or_narrow_types(self, dtype: tf.DType) -> bool:
        return dtype == tf.string or is_narrow(dtype)


@register_op("Cast", since=(1, 6, 9, 13, 19, 21, 23, 24, 25))
class Cast(CastOp):
    def setup(self) -> None:
        target = self.attrs.to
        if isinstance(target, str):  # opset 1 spells the type as a string
            target = TensorProto.DataType.Value(target.upper())
        if target not in ONNX_TO_TF:
            self.bad_attribute("to", f"is not a supported element type ({target})")
        self.dtype = ONNX_TO_TF[target]
        if self.uses_strings_or_narrow_types(self.dtype):
            self.compilable = False

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return cast_to(x, self.dtype, bool(self.attrs.get("saturate", 1)))


@register_op("CastLike", since=(15, 19, 21, 23, 24, 25))
class CastLike(CastOp):
    def compute(self, x: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
        return cast_to(x, like.dtype, bool(self.attrs.get("saturate", 1)))


@register_op("BitCast", since=26)
class BitCast(Op):
    """The same bits read as another type of the same width (bool is one byte: 0 or 1)."""

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        target = ONNX_TO_TF.get(self.attrs.to)
        if target is None or target == tf.string or x.dtype == tf.string:
            raise self.error(f"cannot reinterpret {x.dtype.name} as ONNX type {self.attrs.to}")
        if target.size != x.dtype.size:
            raise self.error(f"{x.dtype.name} and {target.name} differ in width")
        if tf.bool in (x.dtype, target) or x.dtype == target:
            return tf.cast(x, target)
        return tf.bitcast(x, target)
