"""ONNX element types <-> TensorFlow dtypes."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from onnx import TensorProto

_experimental = tf.dtypes.experimental

ONNX_TO_TF: dict[int, tf.DType] = {
    TensorProto.FLOAT: tf.float32,
    TensorProto.UINT8: tf.uint8,
    TensorProto.INT8: tf.int8,
    TensorProto.UINT16: tf.uint16,
    TensorProto.INT16: tf.int16,
    TensorProto.INT32: tf.int32,
    TensorProto.INT64: tf.int64,
    TensorProto.STRING: tf.string,
    TensorProto.BOOL: tf.bool,
    TensorProto.FLOAT16: tf.float16,
    TensorProto.DOUBLE: tf.float64,
    TensorProto.UINT32: tf.uint32,
    TensorProto.UINT64: tf.uint64,
    TensorProto.COMPLEX64: tf.complex64,
    TensorProto.COMPLEX128: tf.complex128,
    TensorProto.BFLOAT16: tf.bfloat16,
    TensorProto.FLOAT8E4M3FN: _experimental.float8_e4m3fn,
    TensorProto.FLOAT8E4M3FNUZ: _experimental.float8_e4m3fnuz,
    TensorProto.FLOAT8E5M2: _experimental.float8_e5m2,
    TensorProto.FLOAT8E5M2FNUZ: _experimental.float8_e5m2fnuz,
    TensorProto.UINT4: _experimental.uint4,
    TensorProto.INT4: _experimental.int4,
    TensorProto.FLOAT4E2M1: _experimental.float4_e2m1fn,
    TensorProto.UINT2: _experimental.uint2,
    TensorProto.INT2: _experimental.int2,
}

TF_TO_ONNX: dict[tf.DType, int] = {dtype: onnx_type for onnx_type, dtype in ONNX_TO_TF.items()}

# Narrow types that TensorFlow stores but cannot compute with (not even cast, for the integer
# ones): values of these types are converted through numpy.
NARROW_DTYPES: frozenset[tf.DType] = frozenset(
    {
        _experimental.float8_e4m3fn,
        _experimental.float8_e4m3fnuz,
        _experimental.float8_e5m2,
        _experimental.float8_e5m2fnuz,
        _experimental.uint4,
        _experimental.int4,
        _experimental.float4_e2m1fn,
        _experimental.uint2,
        _experimental.int2,
    }
)


def tf_dtype(onnx_type: int) -> tf.DType:
    """The TensorFlow dtype of an ONNX element type (raises KeyError when there is none)."""
    return ONNX_TO_TF[onnx_type]


def onnx_elem_type(dtype: tf.DType) -> int:
    return TF_TO_ONNX[tf.as_dtype(dtype)]


def numpy_dtype(onnx_type: int) -> np.dtype:
    return np.dtype(ONNX_TO_TF[onnx_type].as_numpy_dtype)


def is_float(dtype: tf.DType) -> bool:
    return dtype.is_floating


def is_narrow(dtype: tf.DType) -> bool:
    return dtype in NARROW_DTYPES
