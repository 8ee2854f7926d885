"""popart.TensorInfo and popart.DataType."""

import numpy as np
import pytest
from onnx import TensorProto

import popart
from openipu._src.popart.builder.tensor_info import onnx_type_from_user


def test_data_type_members_are_numbered_like_the_original():
    assert [member.name for member in popart.DataType] == [
        "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "UINT32", "UINT64", "BOOL",
        "FLOAT", "FLOAT16", "BFLOAT16", "FLOAT8_143", "FLOAT8_152", "DOUBLE", "COMPLEX64",
        "COMPLEX128", "STRING", "UNDEFINED",
    ]  # fmt: skip
    assert int(popart.DataType.FLOAT) == 9


@pytest.mark.parametrize(
    "dtype, expected",
    [
        ("FLOAT", popart.DataType.FLOAT),
        ("float32", popart.DataType.FLOAT),
        ("FLOAT16", popart.DataType.FLOAT16),
        ("INT32", popart.DataType.INT32),
        (np.float32, popart.DataType.FLOAT),
        (np.dtype("float16"), popart.DataType.FLOAT16),
        (np.int64, popart.DataType.INT64),
        (np.bool_, popart.DataType.BOOL),
        (np.float64, popart.DataType.DOUBLE),
        (popart.DataType.UINT8, popart.DataType.UINT8),
    ],
)
def test_tensor_info_accepts_names_numpy_types_and_enum(dtype, expected):
    info = popart.TensorInfo(dtype, [2, 3])
    assert info.dataType() == expected
    assert info.shape() == [2, 3]


def test_tensor_info_from_array_and_its_methods():
    info = popart.TensorInfo(np.zeros((2, 3, 4), np.float16))
    assert info.data_type() == "FLOAT16"
    assert info.data_type_lcase() == "float16"
    assert (info.rank(), info.nelms(), info.nbytes(), info.dim(1)) == (3, 24, 48, 3)
    assert info == popart.TensorInfo("FLOAT16", (2, 3, 4))
    assert popart.tensorinfo.TensorInfo is popart.TensorInfo


def test_scalar_tensor_info():
    info = popart.TensorInfo("INT64", [])
    assert (info.rank(), info.nelms(), info.shape()) == (0, 1, [])


@pytest.mark.parametrize(
    "args",
    [("NOT_A_TYPE", [1]), ("FLOAT", 23), ("FLOAT", [2.5]), ("FLOAT", [-1]), ("FLOAT",), ()],
)
def test_bad_tensor_info_raises_type_error_that_is_a_popart_exception(args):
    with pytest.raises(TypeError) as raised:
        popart.TensorInfo(*args)
    assert isinstance(raised.value, popart.popart_exception)


def test_a_shape_may_be_a_string_as_the_original_reads_it():
    # The (str, str) constructor (willow/src/tensorinfo.cpp, shapeFromString).
    assert popart.TensorInfo("FLOAT", "(2,3)").shape() == [2, 3]
    assert popart.TensorInfo("FLOAT", "()").shape() == []
    for text, message in [("23", "invalid string for shape"), ("(2, 3)", "contains a space")]:
        with pytest.raises(popart.popart_exception, match=message):
            popart.TensorInfo("FLOAT", text)


def test_element_types_map_to_onnx():
    assert popart.TensorInfo("FLOAT", [1]).onnx_type() == TensorProto.FLOAT
    assert popart.TensorInfo("BFLOAT16", [1]).onnx_type() == TensorProto.BFLOAT16
    assert popart.TensorInfo("FLOAT8_143", [1]).onnx_type() == TensorProto.FLOAT8E4M3FNUZ
    assert onnx_type_from_user("FLOAT16") == TensorProto.FLOAT16
    assert onnx_type_from_user(TensorProto.INT32) == TensorProto.INT32
    assert onnx_type_from_user(popart.DataType.INT8) == TensorProto.INT8
