"""graphcore/popart tests/integration/constant_op_test.py: a Constant with a sparse_value is
refused with the original's message (Cpu)."""

import onnx
import pytest

import popart


@pytest.mark.follows("test_sparse_data")
def test_sparse_data():
    values = onnx.helper.make_tensor("ConstData", onnx.TensorProto.FLOAT, [4], [0, 0.1, 0.2, 0.3])
    indices = onnx.helper.make_tensor("Indices", onnx.TensorProto.INT64, [4], [0, 2, 4, 6])
    sparse = onnx.helper.make_sparse_tensor(values, indices, [8])
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Constant", [], ["ConstOut"], sparse_value=sparse),
            onnx.helper.make_node("Identity", ["ConstOut"], ["IdentityOut"]),
        ],
        "test-model",
        [],
        [onnx.helper.make_tensor_value_info("IdentityOut", onnx.TensorProto.FLOAT, [4])],
    )
    model = onnx.helper.make_model(graph, producer_name="onnx-example")
    model.opset_import[0].version = 11
    onnx.checker.check_model(model)
    data_flow = popart.DataFlow(1, {"IdentityOut": popart.AnchorReturnType("All")})
    with pytest.raises(popart.popart_exception) as e_info:
        popart.InferenceSession(
            model.SerializeToString(), data_flow, popart.DeviceManager().createCpuDevice()
        )
    assert e_info.value.args[0] == "The Constant op attribute 'sparse_value' is not supported."
