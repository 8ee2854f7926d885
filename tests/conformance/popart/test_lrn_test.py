"""graphcore/popart tests/integration/operators_test/lrn_test.py: LRN over the channels of
a 5-D input for every window size from 1 to 11, and its gradient, against the ONNX
definition in numpy and its TensorFlow gradient (Cpu)."""

import math

import numpy as np
import pytest
import tensorflow as tf

import popart

ALPHA, BETA, BIAS = 1e-4, 0.75, 1.0
SIZES = range(1, 12)


def _lrn(x, size):
    """ONNX LRN: x / (bias + alpha / size * sum of squares over channels
    [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]) ** beta, in TensorFlow."""
    channels = x.shape[1]
    before, after = math.floor((size - 1) / 2), math.ceil((size - 1) / 2)
    squares = tf.pad(tf.square(x), [[0, 0], [before, after]] + [[0, 0]] * (len(x.shape) - 2))
    square_sum = tf.add_n([squares[:, i : i + channels] for i in range(size)])
    return x / (BIAS + ALPHA / size * square_sum) ** BETA


@pytest.mark.follows("test_lrn")
def test_lrn(op_tester):
    data = np.random.rand(2, 9, 4, 3, 2).astype(np.float32)

    def init_builder(builder):
        tensor = builder.addInputTensor(data)
        result = []
        for size in SIZES:
            out = builder.aiOnnx.lrn([tensor], alpha=ALPHA, beta=BETA, bias=BIAS, size=size)
            builder.addOutputTensor(out)
            result.append(out)
        return result

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.rtol = 1e-5
    op_tester.atol = 1e-7
    op_tester.run(init_builder, lambda _: [_lrn(data, n).numpy() for n in SIZES], "infer")


@pytest.mark.follows("test_lrn_training")
def test_lrn_training(op_tester):
    op_tester.rtol = 1e-03
    op_tester.atol = 1e-08
    data = np.random.rand(2, 9, 4, 3, 2).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        result = []
        for size in SIZES:
            tensor = builder.addInputTensor(data)
            out = builder.aiOnnx.lrn([tensor], alpha=ALPHA, beta=BETA, bias=BIAS, size=size)
            result += [out, g + tensor]
        sums = [builder.aiOnnx.reducesum([r], axes=range(5), keepdims=False) for r in result[::2]]
        total = builder.aiOnnx.unsqueeze([builder.aiOnnx.sum(sums)], axes=[0])
        builder.addOutputTensor(total)
        return [total, g + total, *result]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        result, total = [], 0.0
        for size in SIZES:
            x = tf.Variable(data)
            with tf.GradientTape() as tape:
                out = _lrn(x, size)
                out_sum = tf.reduce_sum(out)
            result += [out.numpy(), (tape.gradient(out_sum, x) * d__o[0]).numpy()]
            total += out_sum.numpy()
        return [np.array([total], np.float32), d__o, *result]

    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")
