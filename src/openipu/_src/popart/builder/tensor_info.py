"""`popart.DataType` and `popart.TensorInfo`: a tensor's element type and shape.

PopART names element types with upper-case strings ("FLOAT", "INT32"); it also
knows a lower-case, numpy-like spelling ("float32", "int32"), which
`TensorInfo.data_type_lcase()` and `Builder.getTensorDtypeString()` return.
This module maps those names to ONNX `TensorProto` element types and numpy.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto

from openipu._src.popart.errors import TensorInfoError, popart_exception
from openipu._src.popart.pybind_arguments import INT64, STR, Arg, EnumOf, ListOf, Signature, bind


class DataType(enum.IntEnum):
    """PopART's element types, numbered like the original enum."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    INT32 = 4
    INT64 = 5
    UINT32 = 6
    UINT64 = 7
    BOOL = 8
    FLOAT = 9
    FLOAT16 = 10
    BFLOAT16 = 11
    FLOAT8_143 = 12
    FLOAT8_152 = 13
    DOUBLE = 14
    COMPLEX64 = 15
    COMPLEX128 = 16
    STRING = 17
    UNDEFINED = 18


@dataclass(frozen=True)
class _DataTypeFacts:
    onnx_type: int
    lower_case_name: str
    item_size: int  # bytes per element; 0 where it has no fixed size


# Graphcore's FLOAT8 formats (1.4.3 and 1.5.2) are the ones ONNX adopted as the
# "FNUZ" float8 types.
_FACTS: dict[DataType, _DataTypeFacts] = {
    DataType.UINT8: _DataTypeFacts(TensorProto.UINT8, "uint8", 1),
    DataType.INT8: _DataTypeFacts(TensorProto.INT8, "int8", 1),
    DataType.UINT16: _DataTypeFacts(TensorProto.UINT16, "uint16", 2),
    DataType.INT16: _DataTypeFacts(TensorProto.INT16, "int16", 2),
    DataType.INT32: _DataTypeFacts(TensorProto.INT32, "int32", 4),
    DataType.INT64: _DataTypeFacts(TensorProto.INT64, "int64", 8),
    DataType.UINT32: _DataTypeFacts(TensorProto.UINT32, "uint32", 4),
    DataType.UINT64: _DataTypeFacts(TensorProto.UINT64, "uint64", 8),
    DataType.BOOL: _DataTypeFacts(TensorProto.BOOL, "bool", 1),
    DataType.FLOAT: _DataTypeFacts(TensorProto.FLOAT, "float32", 4),
    DataType.FLOAT16: _DataTypeFacts(TensorProto.FLOAT16, "float16", 2),
    DataType.BFLOAT16: _DataTypeFacts(TensorProto.BFLOAT16, "bfloat16", 2),
    DataType.FLOAT8_143: _DataTypeFacts(TensorProto.FLOAT8E4M3FNUZ, "float8_143", 1),
    DataType.FLOAT8_152: _DataTypeFacts(TensorProto.FLOAT8E5M2FNUZ, "float8_152", 1),
    DataType.DOUBLE: _DataTypeFacts(TensorProto.DOUBLE, "float64", 8),
    DataType.COMPLEX64: _DataTypeFacts(TensorProto.COMPLEX64, "complex64", 8),
    DataType.COMPLEX128: _DataTypeFacts(TensorProto.COMPLEX128, "complex128", 16),
    DataType.STRING: _DataTypeFacts(TensorProto.STRING, "string", 0),
    DataType.UNDEFINED: _DataTypeFacts(TensorProto.UNDEFINED, "undefined", 0),
}

_BY_ONNX_TYPE: dict[int, DataType] = {facts.onnx_type: dt for dt, facts in _FACTS.items()}

_BY_NAME: dict[str, DataType] = {dt.name: dt for dt in DataType}
_BY_NAME.update({facts.lower_case_name: dt for dt, facts in _FACTS.items()})
# Spellings people use that the tables above do not cover.
_BY_NAME.update({"HALF": DataType.FLOAT16, "half": DataType.FLOAT16, "float": DataType.FLOAT})


def _numpy_types() -> dict[np.dtype, DataType]:
    mapping: dict[np.dtype, DataType] = {
        np.dtype(np.uint8): DataType.UINT8,
        np.dtype(np.int8): DataType.INT8,
        np.dtype(np.uint16): DataType.UINT16,
        np.dtype(np.int16): DataType.INT16,
        np.dtype(np.int32): DataType.INT32,
        np.dtype(np.int64): DataType.INT64,
        np.dtype(np.uint32): DataType.UINT32,
        np.dtype(np.uint64): DataType.UINT64,
        np.dtype(np.bool_): DataType.BOOL,
        np.dtype(np.float16): DataType.FLOAT16,
        np.dtype(np.float32): DataType.FLOAT,
        np.dtype(np.float64): DataType.DOUBLE,
        np.dtype(np.complex64): DataType.COMPLEX64,
        np.dtype(np.complex128): DataType.COMPLEX128,
        np.dtype(np.str_): DataType.STRING,
        np.dtype(np.object_): DataType.STRING,
    }
    try:  # ml_dtypes ships with TensorFlow; the builder works without it.
        import ml_dtypes
    except ImportError:
        return mapping
    mapping[np.dtype(ml_dtypes.bfloat16)] = DataType.BFLOAT16
    mapping[np.dtype(ml_dtypes.float8_e4m3fnuz)] = DataType.FLOAT8_143
    mapping[np.dtype(ml_dtypes.float8_e5m2fnuz)] = DataType.FLOAT8_152
    return mapping


_BY_NUMPY_TYPE = _numpy_types()


def data_type_from(value: Any) -> DataType:
    """The DataType meant by a name ("FLOAT", "float32"), a numpy dtype or type, or an enum."""
    if isinstance(value, DataType):
        return value
    if isinstance(value, str):
        if value in _BY_NAME:
            return _BY_NAME[value]
        if value.upper() in _BY_NAME:
            return _BY_NAME[value.upper()]
        if value.lower() in _BY_NAME:
            return _BY_NAME[value.lower()]
        raise TensorInfoError(
            f"unknown data type {value!r}; expected one of {', '.join(dt.name for dt in DataType)}"
        )
    if value is None:
        raise TensorInfoError("a data type is required, got None")
    if isinstance(value, enum.Enum) and value.name in _BY_NAME:
        # Another module's DataType-like enum: trust its member names.
        return _BY_NAME[value.name]
    try:
        numpy_type = np.dtype(value)
    except TypeError:
        numpy_type = None
    if numpy_type is not None:
        if numpy_type.kind == "U":
            return DataType.STRING
        if numpy_type in _BY_NUMPY_TYPE:
            return _BY_NUMPY_TYPE[numpy_type]
    raise TensorInfoError(f"cannot make a PopART data type from {value!r}")


def onnx_type_of(data_type: Any) -> int:
    """The ONNX TensorProto element type of a PopART data type (any spelling)."""
    return _FACTS[data_type_from(data_type)].onnx_type


def data_type_of_onnx_type(onnx_type: int) -> DataType:
    if onnx_type not in _BY_ONNX_TYPE:
        name = (
            TensorProto.DataType.Name(onnx_type)
            if onnx_type in TensorProto.DataType.values()
            else onnx_type
        )
        raise TensorInfoError(f"ONNX element type {name} has no PopART data type")
    return _BY_ONNX_TYPE[onnx_type]


def lower_case_name(data_type: DataType) -> str:
    return _FACTS[data_type].lower_case_name


def onnx_type_from_user(value: Any) -> int:
    """An ONNX element type from what users pass as `to`/`dtype`: ONNX ints or PopART spellings."""
    if isinstance(value, DataType):
        return _FACTS[value].onnx_type
    if isinstance(value, (bool, np.bool_)):
        raise TensorInfoError(f"{value!r} is not a data type")
    if isinstance(value, (int, np.integer)):
        # Plain integers are ONNX TensorProto element types, as in ONNX itself.
        if int(value) not in TensorProto.DataType.values():
            raise TensorInfoError(f"{value!r} is not an ONNX TensorProto element type")
        return int(value)
    return onnx_type_of(value)


def _shape_from(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise TensorInfoError(f"a shape must be a list of integers, got {shape!r}")
    dims = []
    for dim in shape:
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
            raise TensorInfoError(f"a shape must be a list of integers, got {shape!r}")
        if dim < 0:
            raise TensorInfoError(f"shape {list(shape)!r} has a negative dimension")
        dims.append(int(dim))
    return tuple(dims)


def _shape_from_string(text: str) -> list[int]:
    """A shape written "(2,3)", as willow/src/tensorinfo.cpp's shapeFromString reads it."""
    if len(text) < 2 or text[0] != "(" or text[-1] != ")":
        raise popart_exception("invalid string for shape")
    if " " in text:
        raise popart_exception("s contains a space : not valid shape string")
    tokens = text[1:-1].split(",") if len(text) > 2 else []
    if tokens and not tokens[-1]:
        tokens.pop()  # std::getline gives no empty token after a final comma
    dims = []
    for token in tokens:
        number = re.match(r"\s*[+-]?\d+", token)  # std::stoi reads a leading integer
        if number is None:
            raise ValueError("stoi")  # std::invalid_argument, which pybind11 makes ValueError
        dims.append(int(number.group()))
    return dims


# The constructors of the original's core TensorInfo (popart._internal.ir bindings/tensorinfo.cpp),
# which popart.TensorInfo (python_files/tensorinfo.py) calls with (dtype, shape).
_DATA_TYPE = EnumOf(DataType, "popart._internal.ir.DataType")
_SHAPE = ListOf(INT64)
_FROM_STRINGS = 3  # the (str, str) overload's index
_CORE_SIGNATURES = (
    Signature(),
    Signature((Arg("dataType", _DATA_TYPE), Arg("shape", _SHAPE))),
    Signature((Arg("dataType", _DATA_TYPE), Arg("shape", _SHAPE), Arg("metaShape", _SHAPE))),
    Signature((Arg("dataType", STR), Arg("shape", STR))),
    Signature((Arg("dataType", STR), Arg("shape", _SHAPE))),
)


class TensorInfo:
    """A data type and a shape: `TensorInfo(dtype, shape)` or `TensorInfo(ndarray)`.

    `dtype` may be a PopART name ("FLOAT", "INT32"), its lower-case form
    ("float32"), a DataType, a numpy dtype or a Python/numpy type; `shape` a list of
    ints or, with a name, a string "(2,3)".
    """

    def __init__(self, *args: Any) -> None:
        if len(args) == 1 and isinstance(args[0], np.ndarray):
            data_type, shape = args[0].dtype, args[0].shape
        elif len(args) == 2:
            data_type, shape = args
        else:
            raise TensorInfoError(
                "TensorInfo takes (dtype, shape) or (numpy.ndarray), "
                f"got {len(args)} argument(s): {args!r}"
            )
        if isinstance(data_type, (np.dtype, type)):
            # The Python wrapper names numpy dtypes and types before the core constructor.
            data_type = data_type_from(data_type).name
        overload, values = bind(
            "__init__", _CORE_SIGNATURES, (data_type, shape), {},
            owner="popart._internal.ir.TensorInfo", constructor=True,
        )  # fmt: skip
        self._data_type = data_type_from(values["dataType"])
        shape = values["shape"]
        self._shape = _shape_from(_shape_from_string(shape) if overload == _FROM_STRINGS else shape)

    def dataType(self) -> DataType:  # noqa: N802 - the original's name
        return self._data_type

    def data_type(self) -> str:
        return self._data_type.name

    def data_type_lcase(self) -> str:
        return lower_case_name(self._data_type)

    def shape(self) -> list[int]:
        return list(self._shape)

    def rank(self) -> int:
        return len(self._shape)

    def dim(self, index: int) -> int:
        return self._shape[index]

    def nelms(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    def nbytes(self) -> int:
        return self.nelms() * _FACTS[self._data_type].item_size

    def onnx_type(self) -> int:
        """The ONNX TensorProto element type (an openipu addition used by the builder)."""
        return _FACTS[self._data_type].onnx_type

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorInfo):
            return NotImplemented
        return (self._data_type, self._shape) == (other._data_type, other._shape)

    def __hash__(self) -> int:
        return hash((self._data_type, self._shape))

    def __repr__(self) -> str:
        return f"TensorInfo({self._data_type.name!r}, {list(self._shape)!r})"

    def __str__(self) -> str:
        return f"{self._data_type.name} {list(self._shape)}"
