"""graphcore/popart tests/integration/operators_test/reshape_test.py: Reshape (ONNX, by a
constant shape with -1 and 0) and ai.graphcore Reshape (shape attribute), forward and
gradient, and the error for two -1 dims (Cpu)."""

import numpy as np
import pytest

import popart


def _reshape(op_tester, add_reshape, expected_shape, train=False):
    data = np.random.rand(2, 4, 3).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        o = add_reshape(builder, i1)
        builder.addOutputTensor(o)
        return [o, g + i1, g + o] if train else [o]

    def reference(ref_data):
        out = data.reshape(expected_shape)
        if not train:
            return [out]
        return [out, ref_data.getOutputTensorGrad(0).reshape(data.shape), None]

    op_tester.run(init_builder, reference, "train" if train else "infer")


def _onnx_reshape(op_tester, shape, expected_shape, train=False):
    if train:
        op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)

    def add_reshape(builder, i1):
        return builder.aiOnnx.reshape([i1, builder.aiOnnx.constant(np.array(shape, np.int64))])

    _reshape(op_tester, add_reshape, expected_shape, train)


def _graphcore_reshape(op_tester, shape, expected_shape, train=False):
    _reshape(op_tester, lambda b, i1: b.aiGraphcore.reshape(i1, shape=shape), expected_shape, train)


@pytest.mark.follows("test_reshape")
def test_reshape(op_tester):
    _onnx_reshape(op_tester, [4, 6], (4, 6))


@pytest.mark.follows("test_reshape_neg_one")
def test_reshape_neg_one(op_tester):
    _onnx_reshape(op_tester, [-1, 6], (4, 6))


@pytest.mark.follows("test_reshape_neg_one_error")
def test_reshape_neg_one_error(op_tester):
    with pytest.raises(popart.popart_exception) as e_info:
        _onnx_reshape(op_tester, [-1, -1, 0], (0,))
    assert "shape input to ReshapeOp can only use -1 to specify one unknown dimension" in str(
        e_info.value
    )


@pytest.mark.follows("test_reshape_zeros")
def test_reshape_zeros(op_tester):
    # 0 copies the input's dim at that place.
    _onnx_reshape(op_tester, [6, 0], (6, 4))


@pytest.mark.follows("test_reshape_neg_one_and_zeros")
def test_reshape_neg_one_and_zeros(op_tester):
    _onnx_reshape(op_tester, [-1, 0], (6, 4))


@pytest.mark.follows("test_reshape_neg_one_and_zeros_grad")
def test_reshape_neg_one_and_zeros_grad(op_tester):
    _onnx_reshape(op_tester, [-1, 0], (6, 4), train=True)


@pytest.mark.follows("test_reshape_graphcore")
def test_reshape_graphcore(op_tester):
    _graphcore_reshape(op_tester, [4, 6], (4, 6))


@pytest.mark.follows("test_reshape_neg_graphcore")
def test_reshape_neg_graphcore(op_tester):
    _graphcore_reshape(op_tester, [-1, 6], (4, 6))


@pytest.mark.follows("test_reshape_zero_graphcore")
def test_reshape_zero_graphcore(op_tester):
    _graphcore_reshape(op_tester, [-1, 0], (6, 4))


@pytest.mark.follows("test_reshape_graphcore_grad")
def test_reshape_graphcore_grad(op_tester):
    _graphcore_reshape(op_tester, [4, 6], (4, 6), train=True)
