"""graphcore/popart tests/integration/operators_test/gemm_test.py: Gemm with scales, either
operand transposed, without C (opset 11), in float16, and its gradients (Cpu)."""

import numpy as np
import pytest

import popart


def _operands(a_shape, b_shape, c_shape=(2, 6), dtype=np.float32):
    a = np.random.rand(*a_shape).astype(dtype)
    b = np.random.rand(*b_shape).astype(dtype)
    c = np.random.rand(*c_shape).astype(dtype) if c_shape else None
    return a, b, c


def _gemm(a, b, c, alpha, beta, trans_a, trans_b):
    out = alpha * np.dot(a.T if trans_a else a, b.T if trans_b else b)
    return out + beta * c if c is not None else out


def _add_gemm(builder, a, b, c, alpha, beta, trans_a, trans_b):
    inputs = [builder.addInputTensor(a), builder.addInputTensor(b)]
    if c is not None:
        inputs.append(builder.addInputTensor(c))
    o = builder.aiOnnx.gemm(inputs, alpha, beta, trans_a, trans_b)
    builder.addOutputTensor(o)
    return inputs, o


def _infer(op_tester, a, b, c, alpha=1.0, beta=1.0, trans_a=False, trans_b=False, onnx=None):
    def init_builder(builder):
        return [_add_gemm(builder, a, b, c, alpha, beta, trans_a, trans_b)[1]]

    def reference(_):
        return [_gemm(a, b, c, alpha, beta, trans_a, trans_b).astype(a.dtype)]

    op_tester.setPatterns(["DecomposeBinaryConstScalar"], enableRuntimeAsserts=False)
    if a.dtype == np.float16:
        op_tester.atol = 1e-2
    opsets = {"ai.onnx": onnx, "ai.graphcore": 1} if onnx else None
    op_tester.run(init_builder, reference, "infer", opsets=opsets)


def _train(op_tester, a, b, c, alpha=1.0, beta=1.0, trans_a=False, trans_b=False, onnx=10):
    alpha, beta = float(alpha), float(beta)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        inputs, o = _add_gemm(builder, a, b, c, alpha, beta, trans_a, trans_b)
        return [o, *[g + i for i in inputs], g + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        a_ = a.T if trans_a else a
        b_ = b.T if trans_b else b
        da = alpha * d__o @ b_.T
        db = alpha * a_.T @ d__o
        grads = [da.T if trans_a else da, db.T if trans_b else db]
        if c is not None:
            grads.append(beta * d__o)
        return [_gemm(a, b, c, alpha, beta, trans_a, trans_b), *grads, None]

    op_tester.setPatterns(
        [
            "DecomposeBinaryConstScalar",
            "PreUniRepl",
            "MatMulLhsGradOp",
            "MatMulRhsGradOp",
            "MulArgGradOp",
        ],
        enableRuntimeAsserts=False,
    )
    op_tester.rtol, op_tester.atol = 1e-5, 1e-6
    op_tester.run(init_builder, reference, "train", opsets={"ai.onnx": onnx, "ai.graphcore": 1})


def _scales():
    return np.random.random(1).astype(np.float32)[0], np.random.random(1).astype(np.float32)[0]


@pytest.mark.follows("test_gemm_basic")
def test_gemm_basic(op_tester):
    _infer(op_tester, *_operands((2, 4), (4, 6)))


@pytest.mark.follows("test_gemm_scale")
def test_gemm_scale(op_tester):
    _infer(op_tester, *_operands((2, 4), (4, 6)), *_scales())


@pytest.mark.follows("test_gemm_transpose_a")
def test_gemm_transpose_a(op_tester):
    _infer(op_tester, *_operands((4, 2), (4, 6)), trans_a=True)


@pytest.mark.follows("test_gemm_transpose_b")
def test_gemm_transpose_b(op_tester):
    _infer(op_tester, *_operands((2, 4), (6, 4)), trans_b=True)


@pytest.mark.follows("test_gemm_transpose_ab")
def test_gemm_transpose_ab(op_tester):
    _infer(op_tester, *_operands((4, 2), (6, 4)), trans_a=True, trans_b=True)


@pytest.mark.follows("test_gemm_basic_grad")
def test_gemm_basic_grad(op_tester):
    _train(op_tester, *_operands((2, 4), (4, 6)))


@pytest.mark.follows("test_gemm_grad")
def test_gemm_grad(op_tester):
    _train(op_tester, *_operands((4, 2), (6, 4)), trans_a=True, trans_b=True)


@pytest.mark.follows("test_gemm_grad_scale")
def test_gemm_grad_scale(op_tester):
    _train(op_tester, *_operands((2, 4), (4, 6)), *_scales())


@pytest.mark.follows("test_gemm_no_C")
def test_gemm_no_C(op_tester):  # noqa: N802
    _infer(op_tester, *_operands((2, 4), (4, 6), None), onnx=11)


@pytest.mark.follows("test_gemm_grad_no_C")
def test_gemm_grad_no_C(op_tester):  # noqa: N802
    _train(op_tester, *_operands((2, 4), (4, 6), None), onnx=11)


@pytest.mark.follows("test_gemm_halfs")
def test_gemm_halfs(op_tester):
    _infer(op_tester, *_operands((2, 4), (4, 6), dtype=np.float16))


@pytest.mark.follows("test_gemm_transpose_ab_halfs")
def test_gemm_transpose_ab_halfs(op_tester):
    _infer(op_tester, *_operands((4, 2), (6, 4), dtype=np.float16), trans_a=True, trans_b=True)
