"""Initializer data in the fields PopART writes them to.

PopART's Builder stores initializer values in the typed fields of the TensorProto
(float_data, int32_data, int64_data, uint64_data), not in raw_data
(willow/src/builder_impl.cpp, `populateTensorProtoFromConstVoidData`), and `modelToHost`
writes new values in place, in whatever layout the model's initializer has
(willow/src/session.cpp, `onnxutil::getMutableData`). Programs that read `float_data`
depend on it.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

# ONNX element type -> the typed field PopART's builder fills.
_TYPED_FIELDS: dict[int, str] = {
    TensorProto.FLOAT: "float_data",
    TensorProto.UINT8: "int32_data",
    TensorProto.INT8: "int32_data",
    TensorProto.UINT16: "int32_data",
    TensorProto.INT16: "int32_data",
    TensorProto.INT32: "int32_data",
    TensorProto.BOOL: "int32_data",
    TensorProto.INT64: "int64_data",
    TensorProto.UINT32: "uint64_data",
    TensorProto.UINT64: "uint64_data",
}
_DATA_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data")


def _fill(tensor: TensorProto, array: np.ndarray, raw: bool) -> TensorProto:
    field = _TYPED_FIELDS.get(tensor.data_type)
    for name in _DATA_FIELDS:
        tensor.ClearField(name)
    if raw or field is None:
        # FLOAT16 and the types PopART's builder refuses: ONNX's raw layout.
        tensor.raw_data = numpy_helper.from_array(array).raw_data
    else:
        values = array.ravel()
        if field != "float_data":  # bools and narrow integers as the field's integers
            values = values.astype(np.uint64 if field == "uint64_data" else np.int64)
        getattr(tensor, field).extend(values.tolist())
    return tensor


def popart_initializer(array: np.ndarray, name: str) -> TensorProto:
    """`array` as PopART's Builder writes an initializer."""
    array = np.asarray(array)
    if array.dtype.kind in "OUS":
        return numpy_helper.from_array(array, name)  # strings: string_data, as ONNX has them
    tensor = TensorProto(
        name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype), dims=array.shape
    )
    return _fill(tensor, array, raw=False)


def with_new_values(tensor: TensorProto, array: np.ndarray) -> TensorProto:
    """`tensor` holding `array` (of its shape) in the fields it already used (raw data for
    one whose data is in an external file, which the model writer then writes there)."""
    external = tensor.data_location == TensorProto.EXTERNAL
    if external or tensor.HasField("raw_data") or tensor.data_type not in _TYPED_FIELDS:
        return numpy_helper.from_array(np.asarray(array), tensor.name)
    updated = TensorProto()
    updated.CopyFrom(tensor)
    array = np.asarray(array, dtype=helper.tensor_dtype_to_np_dtype(tensor.data_type))
    return _fill(updated, array, raw=False)
