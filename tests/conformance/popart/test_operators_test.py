"""graphcore/popart tests/integration/operators_test/operators_test.py (part): elementwise
ops forward, in place and with their gradients (Reciprocal, Div, Fmod, Remainder, Mod,
Sqrt, Sub, Exp, Sigmoid, Asin, Acos, Acosh, Atan, Sinh, Log) and Transpose, against numpy
(Cpu); the lists of supported operations, Add, If and Loop; and convolutions (1-D to 3-D,
grouped, padded, strided and dilated) and their data gradients against onnx.reference's Conv and
central differences of it."""

import numpy as np
import pytest
from popart_onnx_reference import check_against_onnx
from popart_op_checks import check_binary_training, check_unary

import popart

G = popart.reservedGradientPrefix()


def _rand4():
    return np.random.rand(4).astype(np.float32)


def _half_pi():
    return ((np.random.rand(4) - 0.5) * np.pi).astype(np.float32)


def _f32(function):
    return lambda x: function(x.astype(np.float64)).astype(np.float32)


# name -> (builder op, forward, derivative, data)
UNARY = {
    "reciprocal": ("reciprocal", lambda x: 1 / x, lambda x: -1 / x**2, _rand4),
    "sqrt": ("sqrt", np.sqrt, lambda x: 0.5 / np.sqrt(x), _rand4),
    "exp": ("exp", np.exp, np.exp, _rand4),
    "sigmoid": (
        "sigmoid",
        lambda x: 1 / (1 + np.exp(-x)),
        lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2,
        _rand4,
    ),
    "asin": ("asin", np.arcsin, lambda x: 1 / np.sqrt(1 - x**2), _half_pi),
    "acos": ("acos", np.arccos, lambda x: -1 / np.sqrt(1 - x**2), _half_pi),
    "atan": ("atan", np.arctan, lambda x: 1 / (1 + x**2), _half_pi),
    "sinh": ("sinh", np.sinh, np.cosh, _rand4),
    "log": ("log", np.log, lambda x: 1 / x, _rand4),
}


def _unary(op_tester, name, mode, data=None):
    op, forward, derivative, make = UNARY[name]
    data = make() if data is None else data
    op_tester.atol = 1e-7
    check_unary(
        op_tester,
        data,
        lambda b, i: getattr(b.aiOnnx, op)([i]),
        _f32(forward),
        lambda x: derivative(x.astype(np.float64)),
        modes=(mode,),
    )


@pytest.mark.follows("test_reciprocal")
def test_reciprocal(op_tester):
    _unary(op_tester, "reciprocal", "infer")


@pytest.mark.follows("test_reciprocal_grad")
def test_reciprocal_grad(op_tester):
    _unary(op_tester, "reciprocal", "train")


@pytest.mark.follows("test_sqrt")
def test_sqrt(op_tester):
    _unary(op_tester, "sqrt", "infer")


@pytest.mark.follows("test_sqrt_grad")
def test_sqrt_grad(op_tester):
    _unary(op_tester, "sqrt", "train")


@pytest.mark.follows("test_exp")
def test_exp(op_tester):
    _unary(op_tester, "exp", "infer")


@pytest.mark.follows("test_exp_grad")
def test_exp_grad(op_tester):
    _unary(op_tester, "exp", "train")


@pytest.mark.follows("test_sigmoid")
def test_sigmoid(op_tester):
    _unary(op_tester, "sigmoid", "infer")


@pytest.mark.follows("test_sigmoid_grad")
def test_sigmoid_grad(op_tester):
    _unary(op_tester, "sigmoid", "train")


@pytest.mark.follows("test_asin")
def test_asin(op_tester):
    _unary(op_tester, "asin", "infer")


@pytest.mark.follows("test_asin_inplace")
def test_asin_inplace(op_tester):
    _unary(op_tester, "asin", "inplace")


@pytest.mark.follows("test_asin_grad")
def test_asin_grad(op_tester):
    _unary(op_tester, "asin", "train")


@pytest.mark.follows("test_acos")
def test_acos(op_tester):
    _unary(op_tester, "acos", "infer")


@pytest.mark.follows("test_acos_inplace")
def test_acos_inplace(op_tester):
    _unary(op_tester, "acos", "inplace")


@pytest.mark.follows("test_acos_grad")
def test_acos_grad(op_tester):
    _unary(op_tester, "acos", "train")


ACOSH_DATA = np.array([1.0, 1.2, 2.0, 3.0, 10.0, 100.0, 2001.0], dtype=np.float32)


def _acosh(op_tester, mode, data):
    op_tester.atol = 1e-7
    check_unary(
        op_tester,
        data,
        lambda b, i: b.aiOnnx.acosh([i]),
        _f32(np.arccosh),
        lambda x: 1 / (np.sqrt(x.astype(np.float64) - 1) * np.sqrt(x.astype(np.float64) + 1)),
        modes=(mode,),
    )


@pytest.mark.follows("test_acosh")
def test_acosh(op_tester):
    _acosh(op_tester, "infer", ACOSH_DATA)


@pytest.mark.follows("test_acosh_inplace")
def test_acosh_inplace(op_tester):
    _acosh(op_tester, "inplace", ACOSH_DATA)


@pytest.mark.follows("test_acosh_grad")
def test_acosh_grad(op_tester):
    # Acosh's derivative grows without bound towards 1.
    op_tester.rtol = 1e-4
    data = np.array([1.005, 1.2, 2.0, 3.0, 10.0, 10.123456, 100.0, 2001.0], dtype=np.float32)
    _acosh(op_tester, "train", data)


@pytest.mark.follows("test_atan")
def test_atan(op_tester):
    _unary(op_tester, "atan", "infer", data=_rand4())


@pytest.mark.follows("test_atan_inplace")
def test_atan_inplace(op_tester):
    _unary(op_tester, "atan", "inplace")


@pytest.mark.follows("test_atan_grad")
def test_atan_grad(op_tester):
    _unary(op_tester, "atan", "train")


@pytest.mark.follows("test_sinh")
def test_sinh(op_tester):
    _unary(op_tester, "sinh", "infer")


@pytest.mark.follows("test_sinh_inplace")
def test_sinh_inplace(op_tester):
    _unary(op_tester, "sinh", "inplace")


@pytest.mark.follows("test_sinh_grad")
def test_sinh_grad(op_tester):
    _unary(op_tester, "sinh", "train")


@pytest.mark.follows("test_log")
def test_log(op_tester):
    _unary(op_tester, "log", "infer")


@pytest.mark.follows("test_log_grad")
def test_log_grad(op_tester):
    _unary(op_tester, "log", "train")


def _binary_infer(op_tester, build, d1, d2, expected):
    def init_builder(builder):
        o = build(builder, builder.addInputTensor(d1), builder.addInputTensor(d2))
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [expected], "infer")


@pytest.mark.follows("test_div")
def test_div(op_tester):
    d1, d2 = _rand4(), _rand4()
    _binary_infer(op_tester, lambda b, x, y: b.aiOnnx.div([x, y], "test_div"), d1, d2, d1 / d2)


@pytest.mark.follows("test_div_grad")
def test_div_grad(op_tester):
    op_tester.atol = 1e-6
    check_binary_training(
        op_tester,
        lambda b, x, y: b.aiOnnx.div([x, y], "test_div"),
        _rand4(),
        _rand4(),
        lambda x, y: x / y,
        lambda x, y: (1 / y, -x / y**2),
    )


@pytest.mark.follows("test_subtract")
def test_subtract(op_tester):
    d1, d2 = _rand4(), _rand4()
    _binary_infer(op_tester, lambda b, x, y: b.aiOnnx.sub([x, y]), d1, d2, d1 - d2)


@pytest.mark.follows("test_subtract_grad")
def test_subtract_grad(op_tester):
    check_binary_training(
        op_tester,
        lambda b, x, y: b.aiOnnx.sub([x, y]),
        _rand4(),
        _rand4(),
        lambda x, y: x - y,
        lambda x, y: (np.ones_like(x), -np.ones_like(y)),
    )


@pytest.mark.follows("test_fmod")
def test_fmod(op_tester):
    d1, d2 = _rand4() * 10.0, _rand4()

    def build(b, x, y):
        o = b.aiGraphcore.fmod([x, y], "test_fmod")
        assert b.getTensorShape(o) == [4]
        return o

    _binary_infer(op_tester, build, d1, d2, np.fmod(d1, d2))


MIXED_A = np.array([-4.3, 7.2, 5.0, 4.3, -7.2, 8.0]).astype(np.float16)
MIXED_B = np.array([2.1, -3.4, 8.0, -2.1, 3.4, 5.0]).astype(np.float16)


@pytest.mark.follows("test_fmod_mixed_sign_float16")
def test_fmod_mixed_sign_float16(op_tester):
    _binary_infer(
        op_tester,
        lambda b, x, y: b.aiGraphcore.fmod([x, y]),
        MIXED_A,
        MIXED_B,
        np.fmod(MIXED_A, MIXED_B),
    )


@pytest.mark.follows("test_mod_mixed_sign_float16")
@pytest.mark.parametrize("fmod_attr", [0, 1])
def test_mod_mixed_sign_float16(op_tester, fmod_attr):
    expected = np.fmod(MIXED_A, MIXED_B) if fmod_attr else np.mod(MIXED_A, MIXED_B)
    _binary_infer(
        op_tester, lambda b, x, y: b.aiOnnx.mod([x, y], fmod_attr), MIXED_A, MIXED_B, expected
    )


def _remainder_training(op_tester, build, d1, d2, forward):
    """The first input's gradient is the upstream gradient (d/dx of x - k*y is 1)."""

    def init_builder(builder):
        i1, i2 = builder.addInputTensor(d1), builder.addInputTensor(d2)
        o = build(builder, i1, i2)
        builder.addOutputTensor(o)
        return [o, G + i1, i2, G + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        return [forward(d1, d2), d__o, d2, None]

    op_tester.setPatterns(["FmodArg0GradOp"], enableRuntimeAsserts=False)
    op_tester.atol = 1e-6
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_fmod_grad")
def test_fmod_grad(op_tester):
    _remainder_training(
        op_tester, lambda b, x, y: b.aiGraphcore.fmod([x, y]), _rand4() * 10.0, _rand4(), np.fmod
    )


def _signed():
    return (_rand4() - 0.5) * 10.0, _rand4() - 0.5


@pytest.mark.follows("test_remainder_grad")
def test_remainder_grad(op_tester):
    d1, d2 = _signed()
    _remainder_training(op_tester, lambda b, x, y: b.aiGraphcore.remainder([x, y]), d1, d2, np.mod)


@pytest.mark.follows("test_onnx_mod_grad")
@pytest.mark.parametrize("fmod_attr", [0, 1])
def test_onnx_mod_grad(op_tester, fmod_attr):
    d1, d2 = _signed()
    _remainder_training(
        op_tester,
        lambda b, x, y: b.aiOnnx.mod([x, y], fmod_attr),
        d1,
        d2,
        np.fmod if fmod_attr else np.mod,
    )


@pytest.mark.follows("test_transpose")
def test_transpose(op_tester):
    d1 = np.random.rand(3, 5, 2, 7).astype(np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.transpose([builder.addInputTensor(d1)], [2, 0, 3, 1])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [np.transpose(d1, [2, 0, 3, 1])], "infer")


@pytest.mark.follows("test_transpose_grad")
def test_transpose_grad(op_tester):
    d1 = np.random.rand(1, 3, 2, 7, 5).astype(np.float32)
    perm = [1, 3, 0, 4, 2]

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = builder.aiOnnx.transpose([i1], perm)
        builder.addOutputTensor(o)
        return [o, G + i1, G + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        return [np.transpose(d1, perm), np.transpose(d__o, np.argsort(perm)), None]

    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_transpose_sizes")
def test_transpose_sizes(op_tester):
    d1 = np.random.rand(1, 3, 2, 7, 5).astype(np.float32)

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = builder.aiOnnx.transpose([i1], [1, 3, 0, 4])
        builder.addOutputTensor(o)
        return [o, G + i1, G + o]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, lambda _: [], "infer")
    assert e_info.value.args[0] == (
        "Rank of permutation tensor [1 3 0 4], rank 4 must be equal to rank of input tensor, "
        "shape [1 3 2 7 5], rank 5."
    )


@pytest.mark.follows("test_unsqueeze")
def test_unsqueeze(op_tester):
    d1 = np.random.rand(3, 4, 5).astype(np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.unsqueeze([builder.addInputTensor(d1)], axes=[0, 4])
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns([], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [d1.reshape(1, 3, 4, 5, 1)], "infer")


@pytest.mark.follows("test_unsqueeze_grad")
def test_unsqueeze_grad(op_tester):
    d1 = np.random.rand(3, 4, 5).astype(np.float32)

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = builder.aiOnnx.unsqueeze([i1], axes=[0, 4])
        builder.addOutputTensor(o)
        return [o, G + i1, G + o]

    def reference(ref_data):
        return [d1.reshape(1, 3, 4, 5, 1), ref_data.getOutputTensorGrad(0).reshape(3, 4, 5), None]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


def _pad(op_tester, data, lower, upper, mode, pad_value=0.0):
    def init_builder(builder):
        o = builder.aiOnnx.pad(
            [builder.addInputTensor(data)], pads=(lower + upper), mode=mode, value=pad_value
        )
        builder.addOutputTensor(o)
        return [o]

    padding = tuple(zip(lower, upper, strict=True))
    kwargs = {"constant_values": pad_value} if mode == "constant" else {}
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [np.pad(data, padding, mode, **kwargs)], "infer")


PAD_DATA = np.array([[[1.0, 2.0], [3.0, 4.0]]]).astype(np.float32)


@pytest.mark.follows("test_pad")
def test_pad(op_tester):
    _pad(op_tester, PAD_DATA, (2, 1, 1), (1, 0, 2), "constant")


@pytest.mark.follows("test_pad_with_value")
def test_pad_with_value(op_tester):
    _pad(op_tester, PAD_DATA, (2, 1, 1), (1, 0, 2), "constant", pad_value=0.3)


@pytest.mark.follows("test_pad_type_edge")
def test_pad_type_edge(op_tester):
    _pad(op_tester, PAD_DATA, (2, 1, 1), (1, 0, 2), "edge")


@pytest.mark.follows("test_pad_type_reflect")
def test_pad_type_reflect(op_tester):
    data = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).astype(np.float32)
    _pad(op_tester, data, (1, 0), (0, 2), "reflect")


def _negative_padding(data, lower, upper):
    return data[
        tuple(slice(-lo, n + up) for n, lo, up in zip(data.shape, lower, upper, strict=True))
    ]


@pytest.mark.follows("test_negative_padding_func")
def test_negative_padding_func():
    # The original checks its own reference helper: numpy's slicing is the independent side.
    data = np.random.rand(2, 2, 4, 4).astype(np.float32)
    x = _negative_padding(data, [0, 0, -1, -1], [0, 0, -1, -2])
    np.testing.assert_array_equal(x, data[:, :, 1:-1, 1:-2])


@pytest.mark.follows("test_pad_negative_padding")
def test_pad_negative_padding(op_tester):
    data = np.random.rand(2, 2, 4, 4).astype(np.float32)
    lower, upper = (0, 0, -1, -1), (0, 0, -1, -2)

    def init_builder(builder):
        o = builder.aiOnnx.pad(
            [builder.addInputTensor(data)], pads=(lower + upper), mode="constant", value=0.0
        )
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [_negative_padding(data, lower, upper)], "infer")


@pytest.mark.follows("test_pad11")
def test_pad11(op_tester):
    pads = np.array([2, 1, 1, 1, 0, 2]).astype(np.int64)

    def init_builder(builder):
        p = builder.aiOnnx.constant(pads, False)
        v = builder.aiOnnx.constant(np.array([1.0]).astype(np.float32), False)
        o = builder.aiOnnx.pad([builder.addInputTensor(PAD_DATA), p, v], mode="constant")
        builder.addOutputTensor(o)
        return [o]

    expected = np.pad(
        PAD_DATA, tuple(zip(pads[:3], pads[3:], strict=True)), "constant", constant_values=1.0
    )
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(
        init_builder, lambda _: [expected], "infer", opsets={"ai.onnx": 11, "ai.graphcore": 1}
    )


@pytest.mark.follows("test_pad_grad")
def test_pad_grad(op_tester):
    d1 = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]).astype(np.float32)

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = builder.aiOnnx.pad([i1], [0, 2, 1, 1], "constant", 0)
        builder.addOutputTensor(o)
        return [o, G + i1, G + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        return [np.pad(d1, ((0, 1), (2, 1))), d__o[0:2, 2:6], d__o]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


def _reshape_by_shape_of(op_tester, as_constants):
    """Reshape to the shape of another tensor, read by a Shape op."""
    d1 = np.random.rand(2, 4, 3).astype(np.float32)
    d2 = np.zeros((4, 6), dtype=np.float32)

    def init_builder(builder):
        add = builder.aiOnnx.constant if as_constants else builder.addInputTensor
        shape = builder.aiOnnx.shape([add(d2)])
        o = builder.aiOnnx.reshape([add(d1), shape])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [d1.reshape(4, 6)], "infer")


@pytest.mark.follows("test_shape")
def test_shape(op_tester):
    _reshape_by_shape_of(op_tester, as_constants=False)


@pytest.mark.follows("test_shape2")
def test_shape2(op_tester):
    _reshape_by_shape_of(op_tester, as_constants=True)


@pytest.mark.follows("test_flatten_infer")
def test_flatten_infer(op_tester):
    d1 = np.random.rand(2, 3, 4, 5).astype(np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.flatten([builder.addInputTensor(d1)], 2, "test_flatten")
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns([], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [d1.reshape(6, 20)], "infer")


@pytest.mark.follows("test_get_op_types")
def test_get_op_types():
    ops_public = popart.getSupportedOperations(False)
    ops_all = popart.getSupportedOperations(True)
    assert len(ops_public) > 0
    assert len(ops_all) > len(ops_public)


@pytest.mark.follows("test_get_op_types_definition")
def test_get_op_types_definition():
    ops_public = popart.getSupportedOperationsDefinition(False)
    assert len(ops_public) > 0
    for key, definition in ops_public.items():
        assert key.domain is not None and key.type and key.version >= 1
        for tensor in [*definition.inputs, *definition.outputs]:
            assert isinstance(tensor.name, str)
            assert tensor.supportedTensors is not None
        for _, rule in definition.attributes.items():
            assert isinstance(rule.supportedValuesRegex, str)
    assert len(popart.getSupportedOperationsDefinition(True)) > len(ops_public)


@pytest.mark.follows("test_add")
def test_add(op_tester):
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    check_binary_training(
        op_tester,
        lambda b, x, y: b.aiOnnx.add([x, y], "test_add"),
        np.random.rand(2).astype(np.float32),
        np.random.rand(2).astype(np.float32),
        lambda x, y: x + y,
        lambda x, y: (np.ones_like(x), np.ones_like(y)),
    )


def _if(op_tester, then_branch, build_inputs, build_else, expected):
    def init_builder(builder):
        i1, i2, condition = build_inputs(builder)
        then_builder = builder.createSubgraphBuilder()
        then_builder.addInputTensorFromParentGraph(i1)
        then_builder.addInputTensorFromParentGraph(i2)
        then_builder.addOutputTensor(then_builder.aiOnnx.add([i1, i2]))
        else_builder = builder.createSubgraphBuilder()
        build_else(else_builder, i1, i2)
        o = builder.aiOnnx.logical_if([condition], 1, else_builder, then_builder)[0]
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [expected], "infer")


@pytest.mark.follows("test_logical_if")
@pytest.mark.parametrize("then_branch", [True, False])
def test_logical_if(op_tester, then_branch):
    def build_inputs(builder):
        return (
            builder.addInputTensor(np.asarray([0, 20, 5]).astype(np.int32)),
            builder.addInputTensor(np.asarray([7, 2, -1]).astype(np.int32)),
            builder.addInputTensor(np.asarray(then_branch)),
        )

    def build_else(else_builder, i1, i2):
        else_builder.addInputTensorFromParentGraph(i1)
        else_builder.addInputTensorFromParentGraph(i2)
        else_builder.addOutputTensor(else_builder.aiOnnx.sub([i1, i2]))

    expected = [7, 22, 4] if then_branch else [-7, 18, 6]
    _if(op_tester, then_branch, build_inputs, build_else, np.asarray(expected, np.int32))


@pytest.mark.follows("test_logical_if_2")
@pytest.mark.parametrize("then_branch", [True, False])
def test_logical_if_2(op_tester, then_branch):
    # The else branch reads nothing of the parent graph.
    def build_inputs(builder):
        return (
            builder.addInitializedInputTensor(np.asarray(1).astype(np.int32)),
            builder.aiOnnx.constant(np.asarray(2).astype(np.int32)),
            builder.aiOnnx.constant(np.asarray(then_branch)),
        )

    def build_else(else_builder, i1, i2):
        out = else_builder.aiOnnx.constant(np.asarray(10).astype(np.int32))
        else_builder.addOutputTensor(else_builder.aiGraphcore.nop([out]))

    expected = np.asarray(3 if then_branch else 10).astype(np.int32)
    _if(op_tester, then_branch, build_inputs, build_else, expected)


@pytest.mark.follows("test_loop")
def test_loop(op_tester):
    i1 = np.array([[1, 2], [3, 4]]).astype(np.float32)
    trip_count = 10

    def init_builder(builder):
        builder.setGraphName("main_graph")
        a, b = builder.addInputTensor(i1), builder.addInputTensor(i1)
        trips = builder.aiOnnx.constant(np.array(trip_count).astype(np.int64))
        cond = builder.aiOnnx.constant(np.array(True).astype(np.bool_), "cond")
        body = builder.createSubgraphBuilder()
        body.setGraphName("body")
        body.addInputTensor(popart.TensorInfo("INT64", []))
        keepgoing = body.addInputTensor(popart.TensorInfo("BOOL", []))
        a_out = body.aiOnnx.matmul([body.addUntypedInputTensor(a), b])
        body.addOutputTensor(keepgoing)
        body.addOutputTensor(a_out)
        o = builder.aiOnnx.loop([trips, cond, a], 1, body)[0]
        builder.addOutputTensor(o)
        return [o]

    expected = np.linalg.matrix_power(i1.astype(np.float64), trip_count + 1).astype(np.float32)
    op_tester.run(init_builder, lambda _: [expected], step_type="infer")


def _conv(op_tester, data, filt, train=False, bias=None, **attributes):
    """Conv of `data` by `filt` (and `bias`) with `attributes`, forward or with the data's
    gradient, against onnx.reference."""
    arrays = [data, filt] + ([bias] if bias is not None else [])
    op_tester.atol, op_tester.rtol = 1e-5, 1e-4
    if train:
        op_tester.setPatterns(["ConvDataGrad"], enableRuntimeAsserts=False)
    check_against_onnx(
        op_tester,
        arrays,
        lambda b, ids: [b.aiOnnx.conv(ids, **attributes)],
        train_inputs=[0] if train else None,
    )


def _ones(*shape):
    return np.ones(shape, dtype=np.float32)


def _random(*shape):
    return np.random.rand(*shape).astype(np.float32)


PLAIN_2D = {"dilations": [1, 1], "pads": [1, 1, 1, 1], "strides": [1, 1]}


@pytest.mark.follows("test_convolution")
def test_convolution(op_tester):
    _conv(op_tester, _ones(1, 2, 4, 4), _ones(3, 2, 3, 3), **PLAIN_2D)


@pytest.mark.follows("test_convolution_2")
def test_convolution_2(op_tester):
    # The backward convolution differs from the forward one (stride 2, 1x1 kernel).
    attributes = {"dilations": [1, 1], "pads": [0, 0, 0, 0], "strides": [2, 2]}
    _conv(op_tester, _ones(1, 2, 4, 4), _ones(4, 2, 1, 1), train=True, **attributes)


@pytest.mark.follows("test_convolution_3")
def test_convolution_3(op_tester):
    _conv(op_tester, _ones(1, 2, 4, 4), _ones(3, 2, 3, 3), **PLAIN_2D)


@pytest.mark.follows("test_convolution_4")
def test_convolution_4(op_tester):
    _conv(op_tester, _random(1, 6, 4, 4), _random(9, 2, 3, 3), group=3, **PLAIN_2D)


@pytest.mark.follows("test_convolution_5")
def test_convolution_5(op_tester):
    groups = 5
    data, filt = _random(1, groups * 11, 4, 4), _random(groups * 7, 11, 3, 3)
    _conv(op_tester, data, filt, train=True, group=groups, **PLAIN_2D)


@pytest.mark.follows("test_convolution_6")
def test_convolution_6(op_tester):
    # Padding larger than the kernel.
    attributes = {"dilations": [1, 1], "pads": [5] * 4, "strides": [1, 1]}
    _conv(op_tester, _ones(1, 2, 4, 4), _ones(3, 2, 3, 3), train=True, **attributes)


@pytest.mark.follows("test_convolution_7")
def test_convolution_7(op_tester):
    attributes = {"dilations": [3, 3], "pads": [4, 2, 4, 2], "strides": [2, 1]}
    _conv(op_tester, _ones(1, 4, 8, 10), _ones(2, 4, 3, 5), train=True, **attributes)


PLAIN_3D = {"dilations": [1, 1, 1], "pads": [1] * 6, "strides": [1, 1, 1]}


@pytest.mark.follows("test_convolution_3d")
def test_convolution_3d(op_tester):
    _conv(op_tester, _ones(1, 2, 4, 4, 4), _ones(3, 2, 3, 3, 3), **PLAIN_3D)


@pytest.mark.follows("test_convolution_3d_2")
def test_convolution_3d_2(op_tester):
    groups = 5
    data, filt = _random(1, groups * 2, 4, 4, 4), _random(groups * 3, 2, 3, 3, 3)
    _conv(op_tester, data, filt, train=True, group=groups, **PLAIN_3D)


@pytest.mark.follows("test_convolution_default_infer")
def test_convolution_default_infer(op_tester):
    _conv(op_tester, _random(1, 2, 4, 4), _random(3, 2, 3, 3))


@pytest.mark.follows("test_convolution_default_train")
def test_convolution_default_train(op_tester):
    _conv(op_tester, _random(1, 2, 4, 4), _random(3, 2, 3, 3), train=True)


@pytest.mark.follows("test_convolution_with_bias_1d")
def test_convolution_with_bias_1d(op_tester):
    bias = np.arange(3, dtype=np.float32)
    attributes = {"dilations": [1], "pads": [1, 1], "strides": [1]}
    _conv(op_tester, _ones(1, 2, 4), _ones(3, 2, 3), bias=bias, **attributes)


REVERSE_DATA_SHAPE = (4, 1, 3)


def _reverse_builder(data, dims):
    def init_builder(builder):
        o = builder.aiGraphcore.reverse([builder.addInputTensor(data)], dims)
        builder.addOutputTensor(o)
        return [o]

    return init_builder


@pytest.mark.follows("test_reverse")
def test_reverse(op_tester):
    d1 = np.random.rand(*REVERSE_DATA_SHAPE).astype(np.float32)
    expected = np.flip(d1, (2, 1))
    op_tester.run(_reverse_builder(d1, [2, 1]), lambda _: [expected], "infer")
    for dims, message in [
        ([2, -2], "invalid dimension '-2'. Only positive dimensions are supported"),
        ([1, 1], "Dimension 1 appears multiple times"),
        ([3], "invalid dimension '3' for input tensor of rank 3"),
    ]:
        with pytest.raises(popart.popart_exception) as e_info:
            op_tester.run(_reverse_builder(d1, dims), lambda _: [expected], "infer")
        assert message in e_info.value.args[0]


@pytest.mark.follows("test_reverse_grad")
def test_reverse_grad(op_tester):
    d1 = np.random.rand(*REVERSE_DATA_SHAPE).astype(np.float32)

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = builder.aiGraphcore.reverse([i1], [2, 1])
        builder.addOutputTensor(o)
        return [o, G + i1, G + o]

    def reference(ref_data):
        return [np.flip(d1, (2, 1)), np.flip(ref_data.getOutputTensorGrad(0), (2, 1)), None]

    op_tester.run(init_builder, reference, "train")
