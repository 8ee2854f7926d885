"""graphcore/popart tests/integration/operators_test/cast_test_py.py: Cast between integer
and floating types, its gradient between float types, no gradient through a cast from an
integer type (no such anchor; a branch through int32 does not carry gradient) (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_cast")
@pytest.mark.parametrize(
    "src,dst,builder_type,reduce_precision",
    [
        (np.int32, np.float32, "FLOAT", False),
        (np.float32, np.int32, "INT32", False),
        (np.int16, np.float32, "FLOAT", False),
        (np.float32, np.int16, "INT16", False),
        (np.int16, np.float16, "FLOAT16", False),
        (np.float16, np.int16, "INT16", False),
        (np.uint16, np.float16, "FLOAT16", False),
        (np.float16, np.uint16, "UINT16", False),
        (np.int8, np.float16, "FLOAT16", False),
        (np.float16, np.int8, "INT8", False),
        (np.uint8, np.float16, "FLOAT16", False),
        (np.float16, np.uint8, "UINT8", False),
        (np.float32, np.float16, "FLOAT16", True),
        (np.float16, np.float32, "FLOAT", False),
        (np.int32, np.int32, "INT32", False),
    ],
)
def test_cast(op_tester, src, dst, builder_type, reduce_precision):
    d1 = np.random.uniform(0, 20, 5).astype(src)

    def init_builder(builder):
        o = builder.aiOnnx.cast([builder.addInputTensor(d1)], builder_type)
        builder.addOutputTensor(o)
        return [o]

    if src in (np.int8, np.uint8):
        op_tester.options.opxModifyChecking = False
    if reduce_precision:
        op_tester.atol = 1e-2
    op_tester.run(init_builder, lambda _: [d1.astype(dst)], "infer")


@pytest.mark.follows("test_cast_grad")
@pytest.mark.parametrize(
    "src,dst,builder_type",
    [
        (np.float32, np.float32, "FLOAT"),
        (np.float16, np.float32, "FLOAT"),
        (np.float32, np.float16, "FLOAT16"),
        (np.float16, np.float16, "FLOAT16"),
    ],
)
def test_cast_grad(op_tester, src, dst, builder_type):
    d1 = np.random.uniform(0, 10, 10).astype(src)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = builder.aiOnnx.reducesum([builder.aiOnnx.cast([i1], builder_type)])
        builder.addOutputTensor(o)
        return [o, g + i1, g + o]

    def reference(ref_data):
        d_o = ref_data.getOutputTensorGrad(0)
        out = d1.astype(dst).astype(np.float64).sum().reshape(1).astype(dst)
        return [out, np.broadcast_to(d_o, d1.shape).astype(src), d_o]

    op_tester.setPatterns(["PreUniRepl", "PostNRepl", "SqrtGradOp"], enableRuntimeAsserts=False)
    op_tester.rtol = 1e-3
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_cast_no_grad")
@pytest.mark.parametrize("src", [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32])
@pytest.mark.parametrize("builder_type", ["FLOAT", "FLOAT16"])
def test_cast_no_grad(src, builder_type):
    data = np.random.RandomState(0).uniform(0, 10, 10).astype(src)
    builder = popart.Builder()
    input_ = builder.addInputTensor(popart.TensorInfo(data))
    output_ = builder.aiOnnx.cast([input_], builder_type)
    builder.addOutputTensor(output_)
    loss = builder.aiGraphcore.identityloss([output_])
    grad = popart.reservedGradientPrefix() + input_
    data_flow = popart.DataFlow(
        1, {output_: popart.AnchorReturnType("All"), grad: popart.AnchorReturnType("All")}
    )
    options = popart.SessionOptions()
    options.enableStochasticRounding = False
    with pytest.raises(popart.popart_exception) as e_info:
        popart.TrainingSession(
            fnModel=builder.getModelProto(),
            loss=loss,
            dataFlow=data_flow,
            deviceInfo=popart.DeviceManager().createCpuDevice(),
            optimizer=popart.ConstSGD(0.01),
            patterns=popart.Patterns(
                ["PreUniRepl", "PostNRepl", "SqrtGradOp"]
            ).enableRuntimeAsserts(False),
            userOptions=options,
        )
    assert e_info.value.args[0].startswith(f"Anchor tensor `{grad}' not in Ir Tensors.")


@pytest.mark.follows("test_cast_no_grad_branch")
def test_cast_no_grad_branch(op_tester):
    data = np.random.rand(4, 4).astype(np.float32)
    w_data = np.random.rand(4, 4).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i = builder.addInputTensor(data)
        two = builder.aiOnnx.constant(np.array([2], np.float32), "two")
        w = builder.addInitializedInputTensor(w_data)
        a1 = builder.aiOnnx.pow([i, two])
        b1 = builder.aiOnnx.pow([i, two])
        b1 = builder.aiOnnx.cast([builder.aiOnnx.cast([b1], "INT32")], "FLOAT")
        o = builder.aiOnnx.softmax([builder.aiOnnx.sum([a1, b1, w])], axis=1)
        builder.addOutputTensor(o)
        return [o, g + i, g + w, g + o]

    def reference(ref_data):
        z = data**2 + (data**2).astype(np.int32).astype(np.float32) + w_data
        e = np.exp(z - z.max(axis=1, keepdims=True))
        s = e / e.sum(axis=1, keepdims=True)
        d__o = ref_data.getOutputTensorGrad(0)
        d_z = s * (d__o - (d__o * s).sum(axis=1, keepdims=True))
        # Only the float branch carries gradient to the input.
        return [s, 2 * data * d_z, d_z, None]

    op_tester.setPatterns(["PowArg0GradOp"], enableRuntimeAsserts=False)
    op_tester.rtol, op_tester.atol = 1e-4, 1e-6
    op_tester.run(init_builder, reference, "train")
