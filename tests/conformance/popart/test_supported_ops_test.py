"""graphcore/popart tests/integration/supported_ops_test.py: Constant, Shape and
ConstantOfShape are supported operators, and no operator is both supported and in the
unsupported list of opset 10 (Cpu)."""

import onnx.defs
import pytest

import popart


def _supported_types():
    return {op.type for op in popart.getSupportedOperations(False)}


@pytest.mark.follows("test_constant_is_supported")
def test_constant_is_supported():
    assert "Constant" in _supported_types()


@pytest.mark.follows("test_shape_is_supported")
def test_shape_is_supported():
    assert "Shape" in _supported_types()


@pytest.mark.follows("test_constantofshape_is_supported")
def test_constantofshape_is_supported():
    assert "ConstantOfShape" in _supported_types()


def _op_id(opid):
    return f"{opid.type}_{opid.version}"


@pytest.mark.follows("test_unsupported_operations")
def test_unsupported_operations():
    unsupported = popart.getUnsupportedOperations(10)
    # Each listed operator is at the version opset 10 has (ONNX's schemas).
    for opid in unsupported:
        assert opid.version == onnx.defs.get_schema(opid.type, 10, "").since_version
    unsupported_ids = {_op_id(i) for i in unsupported}
    supported_ids = {_op_id(i) for i in popart.getSupportedOperations(False)}
    assert len(unsupported_ids) > 0 and len(supported_ids) > 0
    assert not unsupported_ids & supported_ids
    # Operators the original runs only by rewriting the ONNX model first, and operators it
    # has no op for, are unsupported (willow/src/onnxpasses/, willow/src/op/).
    assert {"Gemm_9", "Acos_7", "StringNormalizer_10", "Upsample_10"} <= unsupported_ids
    assert not {"MatMul_9", "Relu_6", "Conv_1"} & unsupported_ids


@pytest.mark.follows("test_unsupported_operations")
def test_unsupported_operations_are_not_supported():
    """What openipu can check of the scenario: no operator is in both lists, and an unknown
    opset is refused as the original refuses it."""
    unsupported_ids = {_op_id(i) for i in popart.getUnsupportedOperations(10)}
    supported_ids = {_op_id(i) for i in popart.getSupportedOperations(False)}
    assert len(supported_ids) > 0
    assert not unsupported_ids & supported_ids
    with pytest.raises(popart.popart_exception, match="Could not find opset 5"):
        popart.getUnsupportedOperations(5)
