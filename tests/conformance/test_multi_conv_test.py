"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/multi_conv_test.py`.

`ipu.nn_ops.multi_conv` around independent convolutions (Keras Conv2D and DepthwiseConv2D
layers, `nn.conv2d` with `conv2d_transpose`, reused layers, float16 with float32) in TF1
programs compiled for the IPU, trained or not: the outputs and trained variables equal
those of the same program on the CPU without `multi_conv`; convolutions that feed each
other are refused (the original's FailedPreconditionError). The original also counts the
convolutions' kinds and finds the MultiConv compute sets in Poplar's reports, which only
its backend writes; `testOptions` reads the operation's Poplar option flags attribute and
expects Poplar's error for an unknown flag.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1
layers = tf.keras.layers


def _wrapper(on_cpu):
    def wrap(func):
        return func if on_cpu else ipu.nn_ops.multi_conv(func)

    return wrap


def _compare_ipu_to_cpu(make_body, inputs_fn, init_values):
    def run(on_cpu):
        graph = tf.Graph()
        with graph.as_default(), v1.Session(graph=graph) as session:
            inputs = inputs_fn()
            feed = dict(zip(inputs, init_values, strict=True))
            body = make_body(_wrapper(on_cpu))
            scope = "cpu" if on_cpu else "ipu"
            with v1.variable_scope(scope, use_resource=True, reuse=False):
                if on_cpu:
                    res = body(*inputs)
                else:
                    config = ipu.config.IPUConfig()
                    config.ipu_model.compile_ipu_code = False
                    config.optimizations.math.dot_strength = False
                    config.configure_ipu_system()
                    with ipu.scopes.ipu_scope("/device:IPU:0"):
                        res = ipu.ipu_compiler.compile(body, inputs=inputs)
                    ipu.utils.move_variable_initialization_to_cpu()
            session.run(v1.global_variables_initializer())
            result = session.run(res, feed)[0]
            return result, session.run(v1.trainable_variables())

    try:
        res_ipu, vars_ipu = run(on_cpu=False)
    finally:
        ipu.config.reset_ipu_configuration()
    res_cpu, vars_cpu = run(on_cpu=True)
    np.testing.assert_allclose(res_ipu, res_cpu, rtol=1e-3, atol=1e-3)
    assert len(vars_ipu) == len(vars_cpu)
    for got, expected in zip(vars_ipu, vars_cpu, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)


def _two_inputs(a_dtype=np.float32, b_channels=4, labels=True):
    def inputs_fn():
        with tf.device("cpu"):
            placeholders = [
                v1.placeholder(a_dtype, [2, 32, 32, 4]),
                v1.placeholder(np.float32, [2, 32, 32, b_channels]),
            ]
            if labels:
                placeholders.append(v1.placeholder(np.int32, [2]))
        return placeholders

    return inputs_fn


def _train(logits, labels):
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=labels)
    )
    return logits, v1.train.GradientDescentOptimizer(0.001).minimize(loss)


_ONES = [np.ones([2, 32, 32, 4]), np.ones([2, 32, 32, 4]), np.ones([2])]


@pytest.mark.follows("testTraining")
def test_training():
    def make_body(wrap):
        def convs(x, y):
            a = layers.Conv2D(
                2,
                1,
                kernel_initializer="ones",
                bias_initializer=tf.constant_initializer(0.5),
                name="conv1",
            )(x)
            b = layers.Conv2D(
                4,
                1,
                kernel_initializer="ones",
                bias_initializer=tf.constant_initializer(0.2),
                name="conv2",
            )(y)
            return a, b  # fmt: skip

        def body(a, b, labels):
            a, b = wrap(convs)(a, b)
            a, b = wrap(convs)(a, b)
            return _train(tf.reduce_mean(a, axis=[2, 3]) + tf.reduce_mean(b, axis=[2, 3]), labels)

        return body

    _compare_ipu_to_cpu(make_body, _two_inputs(), _ONES)


@pytest.mark.follows("testTrainingDepthwiseTraining")
def test_training_depthwise_training():
    rng = np.random.default_rng(1234)
    w1 = rng.random([4, 4, 4, 2])
    w2 = rng.random([4, 4, 4, 2])

    def make_body(wrap):
        def convs(x, y):
            a = layers.DepthwiseConv2D(
                8,
                2,
                depth_multiplier=2,
                depthwise_initializer=v1.constant_initializer(w1),
                bias_initializer=tf.constant_initializer(0.5),
                name="conv1",
            )(x)
            b = layers.DepthwiseConv2D(
                4,
                2,
                depth_multiplier=2,
                depthwise_initializer=v1.constant_initializer(w2),
                bias_initializer=tf.constant_initializer(0.2),
                name="conv2",
            )(y)
            return a, b  # fmt: skip

        def body(a, b, labels):
            a, b = wrap(convs)(a, b)
            a, b = wrap(convs)(a, b)
            return _train(tf.reduce_mean(a, axis=[1, 2]) + tf.reduce_mean(b, axis=[1, 2]), labels)

        return body

    _compare_ipu_to_cpu(make_body, _two_inputs(), _ONES)


@pytest.mark.follows("testMixedConvs")
def test_mixed_convs():
    rng = np.random.default_rng(1234)
    h_w1 = rng.random([1, 1, 4, 2])
    h_w2 = rng.random([1, 1, 1, 4])

    def make_body(wrap):
        def convs(a, b, w1, w2):
            a = tf.nn.conv2d(a, w1, 1, padding="VALID")
            b = tf.nn.conv2d_transpose(b, w2, [2, 32, 32, 4], 1)
            return a, b

        def body(a, b):
            w1 = v1.get_variable(
                "w1",
                dtype=np.float32,
                shape=[1, 1, 4, 2],
                initializer=v1.constant_initializer(h_w1),
            )
            w2 = v1.get_variable("w2", dtype=np.float32, shape=[1, 1, 4, 2],
                                 initializer=v1.constant_initializer(h_w2))  # fmt: skip
            a, b = wrap(convs)(a, b, w1, w2)
            return tf.reduce_mean(a) + tf.reduce_mean(b), tf.no_op()

        return body

    _compare_ipu_to_cpu(
        make_body, _two_inputs(b_channels=2, labels=False),
        [np.ones([2, 32, 32, 4]), np.ones([2, 32, 32, 2])],
    )  # fmt: skip


def _plain_convs(second_filters=4):
    def convs(x, y):
        a = layers.Conv2D(2, 1, use_bias=False, kernel_initializer="ones", name="conv1")(x)
        b = layers.Conv2D(second_filters, 1, use_bias=False, kernel_initializer="ones",
                          name="conv2")(y)  # fmt: skip
        return a, b

    return convs


@pytest.mark.follows("testReuse")
def test_reuse():
    def make_body(wrap):
        def body(a, b):
            a, b = wrap(_plain_convs())(a, b)
            a = tf.concat([a, a], axis=-1)
            a, b = wrap(_plain_convs())(a, b)
            return tf.reduce_mean(a, axis=[2, 3]) + tf.reduce_mean(b, axis=[2, 3]), tf.no_op()

        return body

    _compare_ipu_to_cpu(make_body, _two_inputs(labels=False), _ONES[:2])


@pytest.mark.follows("testDifferentDataTypes")
def test_different_data_types():
    def make_body(wrap):
        def convs(x, y):
            a = layers.Conv2D(2, 1, use_bias=False, kernel_initializer="ones", name="conv1")(x)
            a = tf.cast(a, dtype=np.float32)
            b = layers.Conv2D(2, 1, use_bias=False, kernel_initializer="ones", name="conv2")(y)
            return a, b

        def body(a, b):
            a, b = wrap(convs)(a, b)
            return tf.reduce_mean(a, axis=[2, 3]) + tf.reduce_mean(b, axis=[2, 3]), tf.no_op()

        return body

    _compare_ipu_to_cpu(make_body, _two_inputs(a_dtype=np.float16, labels=False), _ONES[:2])


@pytest.mark.follows("testDataDependencies")
def test_data_dependencies():
    def make_body(wrap):
        def convs(x):
            a = layers.Conv2D(2, 1, use_bias=False, kernel_initializer="ones", name="conv1")(x)
            return layers.Conv2D(4, 1, use_bias=False, kernel_initializer="ones",
                                 name="conv2")(a)  # fmt: skip

        def body(a):
            return wrap(convs)(a), tf.no_op()

        return body

    def inputs_fn():
        with tf.device("cpu"):
            return [v1.placeholder(np.float32, [2, 32, 32, 4])]

    with pytest.raises(
        tf.errors.FailedPreconditionError,
        match="A MultiConvolution operation requires all convolutions to be independent of "
        "each other",
    ):
        _compare_ipu_to_cpu(make_body, inputs_fn, [np.ones([2, 32, 32, 4])])
