"""graphcore/popart tests/integration/operators_test/pattern_op_removal_test.py: training
through an op whose grad op only a pattern can lower (Cos, Sqrt, Atan2, Sub's second input,
ConvTranspose's weights, ...) fails, naming the pattern, when that pattern is disabled (Cpu)."""

import numpy as np
import pytest

import popart


def _unary(op):
    """input + weight, then `op`: the weight needs the op's input gradient."""

    def build(builder, x, w):
        return op(builder)([builder.aiOnnx.add([x, w], "test_add")])

    return build


CASES = {
    "test_atan2_arg0_grad_error": (
        lambda b, x, w: b.aiGraphcore.atan2([w, x]),
        ["Atan2Arg1GradOp"],
        "Atan2Arg0GradOp",
    ),
    "test_atan2_arg1_grad_error": (
        lambda b, x, w: b.aiGraphcore.atan2([x, w]),
        ["Atan2Arg0GradOp"],
        "Atan2Arg1GradOp",
    ),
    "test_cos_grad_error": (_unary(lambda b: b.aiOnnx.cos), [], "CosGradOp"),
    "test_reciprocal_grad_error": (_unary(lambda b: b.aiOnnx.reciprocal), [], "ReciprocalGradOp"),
    "test_sqrt_grad_error": (_unary(lambda b: b.aiOnnx.sqrt), [], "SqrtGradOp"),
    "test_subtract_grad_error": (lambda b, x, w: b.aiOnnx.sub([x, w]), [], "SubtractArg1GradOp"),
    "test_exp_grad_error": (_unary(lambda b: b.aiOnnx.exp), [], "ExpGradOp"),
    "test_expm1_grad_error": (_unary(lambda b: b.aiGraphcore.expm1), [], "Expm1GradOp"),
    "test_cosh_grad_error": (_unary(lambda b: b.aiOnnx.cosh), [], "CoshOp"),
    "test_log1p_grad_error": (_unary(lambda b: b.aiGraphcore.log1p), [], "Log1pGradOp"),
}


def _refused(op_tester, name, shape=(2, 7)):
    build, patterns, missing = CASES[name]
    rng = np.random.default_rng(0)
    # Positive data: Reciprocal, Sqrt and Log1p stay finite.
    data, weight = (rng.random(shape, np.float32) + 1 for _ in range(2))

    def init_builder(builder):
        x = builder.addInputTensor(data)
        w = builder.addInitializedInputTensor(weight)  # a weight: the grad op is made
        o = build(builder, x, w)
        builder.addOutputTensor(o)
        return [o, popart.reservedGradientPrefix() + o]

    op_tester.setPatterns(patterns, enableRuntimeAsserts=False)
    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, lambda _: [None, None], "train")
    assert e_info.value.args[0].endswith(f"This op should have been removed by pattern {missing}")


@pytest.mark.follows("test_atan2_arg0_grad_error")
def test_atan2_arg0_grad_error(op_tester):
    _refused(op_tester, "test_atan2_arg0_grad_error")


@pytest.mark.follows("test_atan2_arg1_grad_error")
def test_atan2_arg1_grad_error(op_tester):
    _refused(op_tester, "test_atan2_arg1_grad_error")


@pytest.mark.follows("test_cos_grad_error")
def test_cos_grad_error(op_tester):
    _refused(op_tester, "test_cos_grad_error")


@pytest.mark.follows("test_reciprocal_grad_error")
def test_reciprocal_grad_error(op_tester):
    _refused(op_tester, "test_reciprocal_grad_error")


@pytest.mark.follows("test_sqrt_grad_error")
def test_sqrt_grad_error(op_tester):
    _refused(op_tester, "test_sqrt_grad_error")


@pytest.mark.follows("test_subtract_grad_error")
def test_subtract_grad_error(op_tester):
    _refused(op_tester, "test_subtract_grad_error")


@pytest.mark.follows("test_exp_grad_error")
def test_exp_grad_error(op_tester):
    _refused(op_tester, "test_exp_grad_error")


@pytest.mark.follows("test_expm1_grad_error")
def test_expm1_grad_error(op_tester):
    _refused(op_tester, "test_expm1_grad_error")


@pytest.mark.follows("test_cosh_grad_error")
def test_cosh_grad_error(op_tester):
    _refused(op_tester, "test_cosh_grad_error")


@pytest.mark.follows("test_log1p_grad_error")
def test_log1p_grad_error(op_tester):
    _refused(op_tester, "test_log1p_grad_error")


@pytest.mark.follows("test_convflipweights_grad_error")
def test_convflipweights_grad_error(op_tester):
    rng = np.random.default_rng(0)
    x, weights = rng.random((1, 1, 2, 2), np.float32), rng.random((1, 1, 2, 2), np.float32)

    def init_builder(builder):
        d = builder.addInputTensor(x)
        f = builder.addInitializedInputTensor(weights)
        o = builder.aiOnnxOpset11.convtranspose([d, f])
        builder.addOutputTensor(o)
        return [o, popart.reservedGradientPrefix() + o]

    op_tester.setPatterns(["ConvTranspose"], enableRuntimeAsserts=False)
    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, lambda _: [None, None], "train")
    assert e_info.value.args[0].endswith(
        "This op should have been removed by pattern ConvFlipWeightsGradOp"
    )
