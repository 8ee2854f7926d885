"""graphcore/popart tests/integration/operators_test/groupnorm_test.py: ai.graphcore
GroupNormalization returning the normalised data, the groups' means and inverse standard
deviations, with gradients of data, scale and bias, one group per channel, float16, and
strided channel grouping (Cpu)."""

import numpy as np
import pytest

import popart


def group_norm(x, scale, bias, groups, epsilon, strided=False):
    """Normalise each sample's channel groups (contiguous channels, or with `strided`
    channel c in group c % groups); also the groups' means and inverse std devs."""
    n, c = x.shape[:2]
    order = np.argsort(np.arange(c) % groups, kind="stable") if strided else np.arange(c)
    grouped = x[:, order].astype(np.float64).reshape(n, groups, -1)
    mean = grouped.mean(-1, keepdims=True)
    inv_std = 1 / np.sqrt(grouped.var(-1, keepdims=True) + epsilon)
    normed = ((grouped - mean) * inv_std).reshape(x.shape)[:, np.argsort(order)]
    shape = (1, c) + (1,) * (x.ndim - 2)
    y = normed * scale.reshape(shape) + bias.reshape(shape)
    return y, mean.reshape(-1), inv_std.reshape(-1)


def _tf_group_norm(groups, epsilon, mask):
    import tensorflow as tf

    def function(x, scale, bias):
        n, c = x.shape[:2]
        grouped = tf.reshape(x, [n, groups, -1])
        mean = tf.reduce_mean(grouped, -1, keepdims=True)
        var = tf.reduce_mean(tf.square(grouped - mean), -1, keepdims=True)
        normed = tf.reshape((grouped - mean) / tf.sqrt(var + epsilon), x.shape)
        shape = (1, c) + (1,) * (len(x.shape) - 2)
        return (normed * tf.reshape(scale, shape) + tf.reshape(bias, shape)) * mask

    return function


def _train(op_tester, grad_of, d1, scale, bias, groups, epsilon, mask, check_grads=True):
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1, i_scale, i_bias = (builder.addInputTensor(a) for a in (d1, scale, bias))
        i_mask = builder.addInputTensor(mask)
        normed, o_mean, o_invstd = builder.aiGraphcore.groupnormalization(
            [i1, i_scale, i_bias], groups, epsilon
        )
        o_y = builder.aiOnnx.mul([normed, i_mask])
        builder.addOutputTensor(o_y)
        return [o_y, o_mean, o_invstd, g + i1, g + i_scale, g + i_bias, g + o_y]

    def reference(ref_data):
        y, mean, inv_std = group_norm(d1, scale, bias, groups, epsilon)
        d__o = ref_data.getOutputTensorGrad(0)
        f32 = np.float32
        grads = [None, None, None]
        if check_grads:
            grads = grad_of(_tf_group_norm(groups, epsilon, mask), d1, scale, bias, upstream=d__o)
        return [f32(y * mask), f32(mean), f32(inv_std), *grads, d__o]

    op_tester.setPatterns(
        ["PreUniRepl", "ReciprocalGradOp", "MulArgGradOp"], enableRuntimeAsserts=False
    )
    op_tester.rtol, op_tester.atol = 1e-4, 1e-6
    op_tester.run(init_builder, reference, "train")


def _one_per_group(shape, groups):
    mask = np.zeros(shape, np.float32)
    per_group = shape[1] // groups
    for group in range(groups):
        mask[:, group * per_group + np.random.randint(per_group)] = 1.0
    return mask


SMALL = np.array(
    [
        [[[1, 1], [1, 1]], [[1, 1], [1, 1]], [[1, 1], [1, 1]], [[1, 1], [1, 1]]],
        [[[1, 0], [0, 1]], [[1, 0], [0.5, 1]], [[1, 0], [0, 1]], [[1, 0], [0, 1]]],
    ],
    np.float32,
)


@pytest.mark.follows("test_groupnorm_0")
def test_groupnorm_0(op_tester, grad_of):
    d1 = (0.1 * np.random.randn(2, 4, 2, 2) - 0.02).astype(np.float32)
    ones, zeros = np.ones(4, np.float32), np.zeros(4, np.float32)
    # The original checks the forward results only here.
    _train(op_tester, grad_of, d1, ones, zeros, 2, 1e-5, _one_per_group(d1.shape, 2), False)


@pytest.mark.follows("test_groupnorm_1")
def test_groupnorm_1(op_tester, grad_of):
    ones, zeros = np.ones(4, np.float32), np.zeros(4, np.float32)
    _train(op_tester, grad_of, SMALL, ones, zeros, 1, 1e-5, _one_per_group(SMALL.shape, 1))


@pytest.mark.follows("test_groupnorm_2")
def test_groupnorm_2(op_tester):
    d1 = np.random.rand(5, 6, 2, 2).astype(np.float32)
    bias = np.random.rand(6).astype(np.float32) + 0.1
    scale = np.random.rand(6).astype(np.float32) * 0.9 + 0.1

    def init_builder(builder):
        inputs = [builder.addInputTensor(a) for a in (d1, scale, bias)]
        outputs = builder.aiGraphcore.groupnormalization(inputs, 6, 1.0)
        for o in outputs:
            builder.addOutputTensor(o)
        return list(outputs)

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.rtol, op_tester.atol = 1e-5, 1e-7
    expected = [np.float32(a) for a in group_norm(d1, scale, bias, 6, 1.0)]
    op_tester.run(init_builder, lambda _: expected, "infer")


@pytest.mark.follows("test_groupnorm_3")
def test_groupnorm_3(op_tester, grad_of):
    few_places = np.zeros(SMALL.size, np.float32)
    few_places[(np.random.rand(3) * SMALL.size).astype(int)] = 1.0
    ones, zeros = np.ones(4, np.float32), np.zeros(4, np.float32)
    _train(op_tester, grad_of, SMALL, ones, zeros, 1, 0.2, few_places.reshape(SMALL.shape))


@pytest.mark.follows("test_groupnorm_4")
def test_groupnorm_4(op_tester):
    d1 = (0.1 * np.random.rand(2, 4, 2, 2) - 0.02).astype(np.float16)
    bias, scale = np.zeros(4, np.float16), np.ones(4, np.float16)

    def init_builder(builder):
        inputs = [builder.addInputTensor(a) for a in (d1, scale, bias)]
        o_y, o_mean, o_invstd = builder.aiGraphcore.groupnormalization(inputs, 2, 1e-3)
        builder.addOutputTensor(o_y)
        return [o_y, o_mean, o_invstd]

    expected = group_norm(d1, scale, bias, 2, 1e-3, strided=True)
    op_tester.atol, op_tester.rtol = 1e-6, 1e-3
    op_tester.options.groupNormStridedChannelGrouping = True
    op_tester.setPatterns(["PreUniRepl", "ReciprocalGradOp"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [np.float16(a) for a in expected], "infer")
