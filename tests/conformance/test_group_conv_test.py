"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/group_conv_test.py`.

A grouped convolution (input channels a multiple of the filter's), trained one step in
a compiled TF1 program on the IPU, changes the weights and bias as the same
program run by TensorFlow on the CPU, there with one convolution a group (stock
TensorFlow has no CPU gradient of a grouped convolution where oneDNN is not used,
e.g. on CPUs without AVX2). The original also checks the names of Poplar's
compute sets in its report; openipu's emulated IPUs write no Poplar report, so that
part is left out.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compat import v1
from tensorflow.python import ipu

# batch, input size, filter size, input channels a group, output channels a group, groups
CASES = [(1, 1, 1, 2, 3, 2), (1, 12, 3, 8, 3, 4), (1, 12, 3, 64, 9, 16)]


def _grouped_convolution(inp, w, groups):
    return tf.nn.convolution(inp, w, padding="VALID", name="cnv")


def _convolution_by_group(inp, w, groups):
    """The reference: each group's channels convolved with its own filters, then joined."""
    parts = zip(tf.split(inp, groups, axis=-1), tf.split(w, groups, axis=-1), strict=True)
    return tf.concat([tf.nn.convolution(i, f, padding="VALID") for i, f in parts], axis=-1)


def _trained_variables(on_ipu, batch, size, filter_size, channels, outputs, groups, seed):
    rng = np.random.RandomState(seed)
    weights = rng.random_sample([filter_size, filter_size, channels, outputs * groups])
    bias = rng.random_sample([channels * groups])
    data = rng.random_sample([batch, size, size, channels * groups]).astype(np.float32)

    def body(inp, lab):
        w = v1.get_variable("weights", initializer=weights.astype(np.float32))
        b = v1.get_variable("bias", initializer=bias.astype(np.float32))
        # The bias first: the convolution then has an input gradient too.
        a = (_grouped_convolution if on_ipu else _convolution_by_group)(inp + b, w, groups)
        a = tf.reduce_mean(a, axis=[2, 3])
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(logits=a, labels=lab))
        return v1.train.GradientDescentOptimizer(0.001).minimize(loss)

    with v1.Graph().as_default():
        with v1.device("cpu"):
            inp = v1.placeholder(np.float32, data.shape)
            lab = v1.placeholder(np.int32, [1])
        with v1.variable_scope("vs", use_resource=True):
            if on_ipu:
                with ipu.scopes.ipu_scope("/device:IPU:0"):
                    step = ipu.ipu_compiler.compile(body, inputs=[inp, lab])
                ipu.utils.move_variable_initialization_to_cpu()
            else:
                step = body(inp, lab)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            before = sess.run(v1.trainable_variables())
            sess.run(step, {inp: data, lab: np.array([0])})
            # The step's updates: a small learning rate hides them in the weights themselves.
            return [a - b for a, b in zip(sess.run(v1.trainable_variables()), before, strict=True)]


@pytest.mark.follows("testGroupedConvolutions")
@pytest.mark.parametrize("case", CASES)
def test_grouped_convolutions(ipu_system, case):
    ours = _trained_variables(True, *case, seed=sum(case))
    theirs = _trained_variables(False, *case, seed=sum(case))
    # (With one output channel a group the logits have one class: no gradient at all.)
    trains = case[4] * case[1] > 3
    assert any(np.abs(b).max() > 0 for b in theirs) == trains
    for a, b in zip(ours, theirs, strict=True):
        # Updates of weights below 2 differ by at most a float32 rounding step.
        np.testing.assert_allclose(a, b, rtol=1e-2, atol=np.spacing(np.float32(1.0)))
