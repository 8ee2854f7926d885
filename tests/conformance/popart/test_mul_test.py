"""graphcore/popart tests/integration/operators_test/mul_test.py: Mul, broadcast or not, with
gradients; float16 times float32 scalars (mixed precision) and the error for a non-scalar
float32 operand (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_binary_training

import popart


def _mul(b, x, y):
    return b.aiOnnx.mul([x, y])


def _train(op_tester, shape1, shape2):
    d1 = np.random.rand(*shape1).astype(np.float32)
    d2 = np.random.rand(*shape2).astype(np.float32)
    op_tester.setPatterns(["PreUniRepl", "MulArgGradOp"], enableRuntimeAsserts=False)
    check_binary_training(op_tester, _mul, d1, d2, np.multiply, lambda a, b: (b, a))


@pytest.mark.follows("test_mul")
def test_mul(op_tester):
    _train(op_tester, [2], [2])


@pytest.mark.follows("test_broadcast_mul")
def test_broadcast_mul(op_tester):
    _train(op_tester, [2, 2], [2])


INPUT_INFOS = (
    ([], np.float16, [], np.float32),
    ([2, 1], np.float16, [], np.float32),
    ([2, 1], np.float16, [1], np.float32),
    ([1], np.float32, [2, 2], np.float16),
)


@pytest.mark.follows("test_mixed_precision_floating_point_mul")
@pytest.mark.parametrize("in_infos", INPUT_INFOS)
def test_mixed_precision_floating_point_mul(in_infos, op_tester):
    shape0, type0, shape1, type1 = in_infos
    d1 = np.array(np.random.rand(*shape0)).astype(type0)
    d2 = np.array(np.random.rand(*shape1)).astype(type1)

    def init_builder(builder):
        o = _mul(builder, builder.addInputTensor(d1), builder.addInputTensor(d2))
        builder.addOutputTensor(o)
        return [o]

    def reference(_):
        return [(d1.astype(np.float32) * d2.astype(np.float32)).astype(np.float16)]

    op_tester.atol = 1e-03
    op_tester.run(init_builder, reference)


@pytest.mark.follows("test_fp16_and_nonscalar_fp32_input_mul")
def test_fp16_and_nonscalar_fp32_input_mul(op_tester):
    d1 = np.random.rand(2, 2).astype(np.float16)
    d2 = np.random.rand(2, 2).astype(np.float32)

    def init_builder(builder):
        o = _mul(builder, builder.addInputTensor(d1), builder.addInputTensor(d2))
        builder.addOutputTensor(o)
        return [o]

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, lambda _: [None])
    assert e_info.value.args[0].endswith(
        "incompatible types FLOAT16 and FLOAT (shapes [2 2] and [2 2])"
    )
