"""graphcore/popart tests/integration/type_casting_test.py: `popart.GraphTransformer`'s type
conversions rewrite the data of a tensor attribute (a ConstantOfShape's value, in an opset-9
model) to the type the IPU supports, keeping the shapes of inputs and outputs and the values:
UINT8/UINT16/INT8/INT16/INT64 to INT32 (in int32_data), DOUBLE to FLOAT16 (raw_data) or FLOAT
(float_data), BFLOAT16 to FLOAT (float_data); and INT64 to INT32 with clipping lets a Slice with
an out-of-range start run (Cpu)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import popart

VALUES = np.array([[1, 2], [3, 4], [5, 6]])


def _model(dtype, tensor):
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", inputs=["X"], outputs=["Y"], value=tensor)],
        "test-model",
        [helper.make_tensor_value_info("X", dtype, [3, 2])],
        [helper.make_tensor_value_info("Y", dtype, [3, 2])],
    )
    # The original's models are opset 9 (ConstantOfShape with a multi-valued tensor).
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])


def _convert(tmp_path, model, conversion):
    path = str(tmp_path / "type_test.onnx")
    onnx.save_model(model, path)
    transformer = popart.GraphTransformer(path)
    getattr(transformer, conversion)()
    modified_path = str(tmp_path / "type_test_modified.onnx")
    popart.Builder(transformer.getModelProto()).saveModelProto(modified_path)
    modified = onnx.load(modified_path)
    onnx.checker.check_model(modified)
    for value in (modified.graph.input[0], modified.graph.output[0]):
        shape = value.type.tensor_type.shape
        assert [d.dim_value for d in shape.dim] == [3, 2]
    return modified.graph.node[0].attribute[0].t


INTEGER_CASES = [
    ("test_type_cast_UINT8ToINT32", TensorProto.UINT8, np.uint8, "convertUINT8ToINT32"),
    ("test_type_cast_UINT16ToINT32", TensorProto.UINT16, np.uint16, "convertUINT16ToINT32"),
    ("test_type_cast_INT8ToINT32", TensorProto.INT8, np.int8, "convertINT8ToINT32"),
    ("test_type_cast_INT16ToINT32", TensorProto.INT16, np.int16, "convertINT16ToINT32"),
]


def _integer_case(tmp_path, onnx_type, np_type, conversion):
    values = VALUES.astype(np_type)
    tensor = helper.make_tensor("const_tensor", onnx_type, values.shape, values.tobytes(), raw=True)
    converted = _convert(tmp_path, _model(onnx_type, tensor), conversion)
    assert len(converted.int32_data) * np.dtype(np_type).itemsize == len(tensor.raw_data)
    np.testing.assert_array_equal(converted.int32_data, values.flatten())


@pytest.mark.follows("test_type_cast_UINT8ToINT32")
def test_type_cast_uint8_to_int32(tmp_path):
    _integer_case(tmp_path, *INTEGER_CASES[0][1:])


@pytest.mark.follows("test_type_cast_UINT16ToINT32")
def test_type_cast_uint16_to_int32(tmp_path):
    _integer_case(tmp_path, *INTEGER_CASES[1][1:])


@pytest.mark.follows("test_type_cast_INT8ToINT32")
def test_type_cast_int8_to_int32(tmp_path):
    _integer_case(tmp_path, *INTEGER_CASES[2][1:])


@pytest.mark.follows("test_type_cast_INT16ToINT32")
def test_type_cast_int16_to_int32(tmp_path):
    _integer_case(tmp_path, *INTEGER_CASES[3][1:])


@pytest.mark.follows("test_type_cast_INT64ToINT32")
def test_type_cast_int64_to_int32(tmp_path):
    values = VALUES.astype(np.int64)
    tensor = helper.make_tensor("const_tensor", TensorProto.INT64, values.shape, values.flatten())
    converted = _convert(tmp_path, _model(TensorProto.INT64, tensor), "convertINT64ToINT32")
    assert len(converted.int32_data) == len(tensor.int64_data)
    np.testing.assert_array_equal(converted.int32_data, values.flatten())


DOUBLES = np.array([[0.1, 0.3], [1.5, -2.25], [1000.0, 7.0]])


@pytest.mark.follows("test_type_cast_DoubleToHalf")
def test_type_cast_double_to_half(tmp_path):
    tensor = helper.make_tensor("const_tensor", TensorProto.DOUBLE, [3, 2], DOUBLES.flatten())
    converted = _convert(tmp_path, _model(TensorProto.DOUBLE, tensor), "convertDoublesToHalfs")
    assert len(converted.raw_data) == 2 * len(tensor.double_data)
    np.testing.assert_allclose(
        np.frombuffer(converted.raw_data, dtype=np.float16), tensor.double_data, rtol=1e-3
    )


@pytest.mark.follows("test_type_cast_DoubleToFloat")
def test_type_cast_double_to_float(tmp_path):
    tensor = helper.make_tensor("const_tensor", TensorProto.DOUBLE, [3, 2], DOUBLES.flatten())
    converted = _convert(tmp_path, _model(TensorProto.DOUBLE, tensor), "convertDoublesToFloats")
    assert len(converted.float_data) == len(tensor.double_data)
    np.testing.assert_allclose(converted.float_data, DOUBLES.flatten(), rtol=1e-7)


@pytest.mark.follows("test_type_cast_BFloatToFloat")
def test_type_cast_bfloat_to_float(tmp_path):
    floats = np.array([0.1, -3.7, 12.5, 1000.25, -0.004, 2.0], dtype=np.float32)
    # bfloat16: the upper half of each float32 (truncated, loses about 3 digits).
    upper = (floats.view(np.uint32) >> 16).astype(np.uint16)
    truncated = (upper.astype(np.uint32) << 16).view(np.float32)
    tensor = helper.make_tensor(
        "const_tensor", TensorProto.BFLOAT16, [3, 2], upper.tobytes(), raw=True
    )
    converted = _convert(
        tmp_path, _model(TensorProto.BFLOAT16, tensor), "convertBFloats16ToFloat32"
    )
    assert len(converted.float_data) == 6
    np.testing.assert_allclose(converted.float_data, floats, rtol=1e-2)
    np.testing.assert_array_equal(converted.float_data, truncated)


@pytest.mark.follows("test_type_cast_INT64ToINT32_clip")
def test_type_cast_int64_to_int32_clip():
    d1 = np.array([[-1, -2, -3], [4, 5, 6], [7, 8, 9]]).astype(np.float32)
    d2 = np.array([0, 1]).astype(np.int64)
    builder = popart.Builder()
    i1 = builder.addInputTensor("FLOAT", d1.shape)
    i2 = builder.addInputTensor("INT64", d2.shape)
    g = builder.aiOnnx.gather([i1, i2], 0)
    axes = builder.aiOnnx.constant(np.array([0], dtype=np.int64))
    # A start valid for ONNX but out of int32's range: clipping keeps the same slice.
    starts = builder.aiOnnx.constant(np.array([-9223372036854775807], dtype=np.int64))
    ends = builder.aiOnnx.constant(np.array([2], dtype=np.int64))
    o = builder.aiOnnx.add([g, builder.aiOnnx.slice([i1, starts, ends, axes])])
    transformer = popart.GraphTransformer(builder.getModelProto())
    transformer.convertINT64ToINT32(clip=True)
    session = popart.InferenceSession(
        fnModel=transformer.getModelProto(),
        dataFlow=popart.DataFlow(1, [o]),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({i1: d1, i2: d2}, anchors))
    np.testing.assert_allclose(anchors[o], 2 * np.take(d1, d2, axis=0))
