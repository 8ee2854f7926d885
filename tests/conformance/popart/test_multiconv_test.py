"""graphcore/popart tests/integration/operators_test/multiconv_test.py: ai.graphcore MultiConv,
two convolutions of 1 to 3 spatial dims in one op, inference with and without per-convolution
dilations, pads and strides, training (data, weight and bias gradients) with default and with
all the convolution options, the builder's checks of its arguments and shape inference (Cpu).
The reference is stock TensorFlow's convolution in place of torch's."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

import popart

DIMS = list(itertools.product([1, 2, 3], [1, 2, 3]))


def _conv(data, weights, bias=None, dilation=1, pad=0, stride=1):
    """torch.nn.ConvNd: NC... data, OI... weights, symmetric padding."""
    dims = len(data.shape) - 2
    x = tf.transpose(data, [0, *range(2, dims + 2), 1])
    x = tf.pad(x, [[0, 0]] + [[pad, pad]] * dims + [[0, 0]])
    w = tf.transpose(weights, [*range(2, dims + 2), 1, 0])
    y = tf.nn.convolution(x, w, strides=stride, dilations=dilation, padding="VALID")
    if bias is not None:
        y = y + bias
    return tf.transpose(y, [0, dims + 1, *range(1, dims + 1)])


def _data(dims, sizes=(4, 5)):
    rng = np.random.default_rng(0)
    r = lambda *shape: rng.random(shape, np.float32)  # noqa: E731
    return (
        r(1, 6, *[sizes[0]] * dims[0]),
        r(2, 3, *[sizes[1]] * dims[1]),
        r(9, 6, *[3] * dims[0]),
        r(4, 3, *[2] * dims[1]),
        r(4),
    )


@pytest.mark.follows("test_multiconv_infer")
@pytest.mark.parametrize("dims", DIMS)
def test_multiconv_infer(op_tester, dims):
    data0, data1, filt0, filt1, bias1 = _data(dims)

    def init_builder(builder):
        d0, d1 = builder.addInputTensor(data0), builder.addInputTensor(data1)
        f0 = builder.addInputTensor(filt0)
        f1 = builder.addInitializedInputTensor(filt1)
        b1 = builder.addInitializedInputTensor(bias1)
        return builder.aiGraphcore.multiconv(
            [[d0, f0], [d1, f1, b1]],
            dilations=[[1] * dims[0], [2] * dims[1]],
            pads=[[2] * 2 * dims[0], [0] * 2 * dims[1]],
            strides=[[1] * dims[0], [1] * dims[1]],
        )

    def reference(_):
        return [
            _conv(data0, filt0, pad=2).numpy(),
            _conv(data1, filt1, bias1, dilation=2).numpy(),
        ]

    op_tester.atol = 1e-6
    op_tester.run(init_builder, reference, step_type="infer")


@pytest.mark.follows("test_multiconv_infer_default")
def test_multiconv_infer_default(op_tester):
    data0, data1, filt0, filt1, _ = _data((2, 2))

    def init_builder(builder):
        d0, d1 = builder.addInputTensor(data0), builder.addInputTensor(data1)
        f0 = builder.addInputTensor(filt0)
        f1 = builder.addInitializedInputTensor(filt1)
        return builder.aiGraphcore.multiconv([[d0, f0], [d1, f1]])

    op_tester.atol = 1e-6
    op_tester.run(
        init_builder, lambda _: [_conv(data0, filt0).numpy(), _conv(data1, filt1).numpy()]
    )


def _train(op_tester, dims, with_bias, **options):
    data0, data1, filt0, filt1, bias1 = _data(dims, sizes=(6, 5))
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        d0, d1 = builder.addInputTensor(data0), builder.addInputTensor(data1)
        f0 = builder.addInputTensor(filt0)
        f1 = builder.addInitializedInputTensor(filt1)
        second = [d1, f1]
        if with_bias:
            b1 = builder.addInitializedInputTensor(bias1)
            second.append(b1)
        c0, c1 = builder.aiGraphcore.multiconv([[d0, f0], second], **options)
        out = builder.aiOnnx.add(
            [builder.aiOnnx.reducesum([c0], keepdims=0), builder.aiOnnx.reducesum([c1], keepdims=0)]
        )
        return [out, g + d0, g + d1, g + f0, g + f1] + ([g + b1] if with_bias else [])

    @tf.function  # eager Conv3D has no gradient in stock TensorFlow
    def gradients(*tensors):
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            d0, d1, f0, f1, b1 = tensors
            out = tf.reduce_sum(_conv(d0, f0)) + tf.reduce_sum(
                _conv(d1, f1, b1 if with_bias else None)
            )
        return out, tape.gradient(out, list(tensors) if with_bias else list(tensors[:4]))

    def reference(_):
        out, grads = gradients(*map(tf.constant, (data0, data1, filt0, filt1, bias1)))
        return [out.numpy(), *[grad.numpy() for grad in grads]]

    op_tester.rtol, op_tester.atol = 1e-5, 1e-4
    op_tester.setPatterns(["ConvDataGrad"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, step_type="train")


@pytest.mark.follows("test_multiconv_train_default_parameters_and_conv_options")
@pytest.mark.parametrize("dims", DIMS)
def test_multiconv_train_default_parameters_and_conv_options(op_tester, dims):
    _train(op_tester, dims, with_bias=True)


@pytest.mark.follows("test_multiconv_train_all_conv_options")
def test_multiconv_train_all_conv_options(op_tester):
    _train(
        op_tester,
        (2, 2),
        with_bias=False,
        planType="serial",
        cycleBackOff=0.3,
        perConvReservedTiles=100,
        partialsTypes=["float", "float"],
        availableMemoryProportions=[0.9, 0.2],
    )


@pytest.mark.follows("test_multiconv_bad_options")
def test_multiconv_bad_options():
    builder = popart.Builder()
    d0 = builder.addInputTensor("FLOAT", [1, 2, 4, 4])
    f0 = builder.addInputTensor("FLOAT", [10, 2, 3, 3])
    with pytest.raises(popart.popart_exception) as e_info:
        builder.aiGraphcore.multiconv([[d0, f0], [d0, f0]], dilations=[[1, 1], [2, 2, 2]])
    assert e_info.value.args[0] == "Length of dilations vector 3 != number of spatial dimensions 2"
    with pytest.raises(popart.popart_exception) as e_info:
        builder.aiGraphcore.multiconv([[d0, f0], [d0, f0]], dilations=[[1, 1], [2, 2], [3, 3]])
    assert e_info.value.args[0].endswith(
        "number of dilations parameter sets (3) does not match the number of input sets (2)"
    )
    with pytest.raises(popart.popart_exception) as e_info:
        builder.aiGraphcore.multiconv([[d0], [d0, f0]])
    assert e_info.value.args[0].endswith("must have at least two inputs - data and weights")
    with pytest.raises(popart.popart_exception) as e_info:
        builder.aiGraphcore.multiconv([[d0, f0, d0, f0], [d0, f0]])
    assert e_info.value.args[0].endswith("can have at most three inputs - data, weights, and bias")


@pytest.mark.follows("test_multiconv_shape_inference")
def test_multiconv_shape_inference():
    builder = popart.Builder()
    d0 = builder.addInputTensor("FLOAT", [1, 6, 4])
    f0 = builder.addInputTensor("FLOAT", [9, 6, 3])
    d1 = builder.addInputTensor("FLOAT", [2, 3, 5, 5])
    f1 = builder.addInputTensor("FLOAT", [4, 3, 2, 2])
    c0, c1 = builder.aiGraphcore.multiconv([[d0, f0], [d1, f1]])
    assert builder.getTensorShape(c0) == [1, 9, 2]
    assert builder.getTensorShape(c1) == [2, 4, 4, 4]
    [c2] = builder.aiGraphcore.multiconv(
        [[d1, f1]], pads=[[0, 0, 0, 0]], dilations=[[2, 2]], strides=[[1, 1]]
    )
    assert builder.getTensorShape(c2) == [2, 4, 3, 3]
