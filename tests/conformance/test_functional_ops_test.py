"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/functional_ops_test.py`.

`ipu.outlined_function` in TF1 programs compiled with `ipu_compiler.compile` (inference,
training, nesting, variables created inside, a serialised embedding lookup, functions of
different types, constants captured or passed), in a `jit_compile` function under a
gradient tape, and inside a Keras layer. The original also checks, in Poplar's report,
that each function's code exists once (compute-set names, computation counts, tile
memory); only its backend writes those reports, so here the programs are checked by their
results (references from numpy). `testResourceUpdateErrors` drives the original's internal
`resource_update` operation through its generated op module, which has no counterpart.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu

v1 = tf.compat.v1


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.fixture
def configure():
    def configure_system(**options):
        config = ipu.config.IPUConfig()
        config.ipu_model.compile_ipu_code = False
        for name, value in options.items():
            setattr(config, name, value)
        config.configure_ipu_system()

    yield configure_system
    ipu.config.reset_ipu_configuration()


def _ones_variable(name, shape):
    return v1.get_variable(name, shape=shape, dtype=np.float32, initializer=v1.ones_initializer())


def _run(res, feed):
    with tu.ipu_session() as sess:
        tu.move_variable_initialization_to_cpu()
        sess.run(v1.global_variables_initializer())
        return sess.run(res, feed)


@pytest.mark.follows("testFunctionInferenceWithVariableScope")
def test_function_inference_with_variable_scope(tf1_graph, configure):
    configure()

    def func(a, b, name):
        @ipu.outlined_function
        def outlined_func(a, b):
            with v1.variable_scope(name, use_resource=True):
                w = _ones_variable("w", [64, 64])
            return tf.sigmoid(tf.matmul(a, w) + b)

        return outlined_func(a, b)

    def body(a, b, c):
        a = func(a, b, name="one")
        return a - func(a, c, name="two")

    with tf.device("cpu"):
        a, b, c = (v1.placeholder(np.float32, [64, 64]) for _ in range(3))
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(body, inputs=[a, b, c])
    result = _run(res, {x: np.ones(x.shape) for x in [a, b, c]})

    first = _sigmoid(np.ones([64, 64]) @ np.ones([64, 64]) + 1)
    expected = first - _sigmoid(first @ np.ones([64, 64]) + 1)
    np.testing.assert_allclose(result[0], expected, atol=1e-6)
    assert {v.name for v in v1.global_variables()} == {"one/w:0", "two/w:0"}


def _train_two_calls(func, a, b, c, labels):
    with v1.variable_scope("vs", use_resource=True):
        w0 = _ones_variable("w0", [64, 64])
        w1 = _ones_variable("w1", [64, 64])
    a = func(a, w0, b)
    a = a - func(a, w1, c)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(logits=a, labels=labels))
    train_op = v1.train.GradientDescentOptimizer(0.001).minimize(loss)
    return a, train_op


def _check_training(func):
    with tf.device("cpu"):
        a, b, c = (v1.placeholder(np.float32, [64, 64]) for _ in range(3))
        labels = v1.placeholder(np.int32, [64])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(
            lambda *args: _train_two_calls(func, *args), inputs=[a, b, c, labels]
        )
    with tu.ipu_session() as sess:
        tu.move_variable_initialization_to_cpu()
        sess.run(v1.global_variables_initializer())
        feed = {x: np.ones(x.shape) for x in [a, b, c, labels]}
        result = sess.run(res, feed)
    np.testing.assert_allclose(result[0], np.zeros([64, 64]), atol=1e-6)


@pytest.mark.follows("testFunctionTraining")
def test_function_training(tf1_graph, configure):
    configure()

    @ipu.outlined_function
    def func(lhs, rhs, a):
        return tf.sigmoid(tf.matmul(lhs, rhs) + a)

    _check_training(func)


@pytest.mark.follows("testFunctionTrainingConstants")
def test_function_training_constants(tf1_graph, configure):
    configure()

    @ipu.outlined_function
    def func(lhs, rhs, a):
        # The number of splits reaches the gradient function.
        rhs_1, rhs_2 = tf.split(rhs, 2, -1)
        x = tf.concat([tf.matmul(lhs, rhs_1), tf.matmul(lhs, rhs_2)], axis=1)
        return tf.sigmoid(x + a)

    _check_training(func)


@pytest.mark.follows("testNestedFunctionTraining")
def test_nested_function_training(tf1_graph, configure):
    configure()

    def matmul_with_bias(x, scope_name):
        @ipu.outlined_function
        def func(x):
            with v1.variable_scope(scope_name, use_resource=True):
                w = _ones_variable("w", [64, 64])
            x = x @ w
            with v1.variable_scope(scope_name, use_resource=True):
                bias = _ones_variable("bias", [x.shape.as_list()[-1]])
            return x + bias

        return func(x)

    def cached_func(x, scope_name):
        @ipu.outlined_function
        def func(x):
            return tf.sigmoid(matmul_with_bias(x, scope_name))

        return func(x)

    def body(x, labels):
        x = cached_func(x, "1")
        x = cached_func(x, "2")
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(logits=x, labels=labels)
        )
        return x, v1.train.GradientDescentOptimizer(0.001).minimize(loss)

    with tf.device("cpu"):
        a = v1.placeholder(np.float32, [64, 64])
        labels = v1.placeholder(np.int32, [64])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(body, inputs=[a, labels])
    result = _run(res, {x: np.ones(x.shape) for x in [a, labels]})
    np.testing.assert_allclose(result[0], np.ones([64, 64]), atol=1e-6)
    assert {v.name for v in v1.global_variables()} == {"1/w:0", "1/bias:0", "2/w:0", "2/bias:0"}


@pytest.mark.follows("testFunctionSerializedLookup")
def test_function_serialized_lookup(tf1_graph, configure):
    configure()
    dict_size, emb_size, num_splits = 20000, 128, 10
    split_size = dict_size // num_splits

    @ipu.outlined_function(keep_input_layouts=False)
    def func(table, indices, min_idx, max_idx):
        # A serialised embedding lookup: shift the indices, mask those out of range.
        x = ipu.embedding_ops.embedding_lookup(table, indices - min_idx)
        mask = tf.logical_and(tf.less(indices, max_idx), tf.greater_equal(indices, min_idx))
        return x * tf.expand_dims(tf.cast(mask, np.float16), 1)

    def body(table, indices):
        output = func(tf.slice(table, [0, 0], [split_size, emb_size]), indices, 0, split_size)
        for i in range(1, num_splits):
            low, high = split_size * i, split_size * (i + 1)
            sliced = tf.slice(table, [low, 0], [split_size, emb_size])
            output = tf.add(output, func(sliced, indices, low, high), name=f"slice_{i}")
        return output

    with tf.device("cpu"):
        table = v1.placeholder(np.float16, [dict_size, emb_size])
        indices = v1.placeholder(np.int32, [num_splits * 2])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(body, inputs=[table, indices])

    i_h = np.arange(0, dict_size, step=split_size // 2)
    w_h = np.arange(emb_size, dtype=np.float16) * np.ones([dict_size, emb_size], np.float16)
    with tu.ipu_session(disable_grappler_optimizers=["arithmetic_optimization"]) as sess:
        result = sess.run(res, {table: w_h, indices: i_h})
    np.testing.assert_allclose(result[0], np.take(w_h, i_h, axis=0))


@pytest.mark.follows("testFunctionsNoMatch")
def test_functions_no_match(tf1_graph, configure):
    configure()

    @ipu.outlined_function
    def func(a):
        return tf.nn.relu(a)

    def body(a, b, c):
        return func(a), func(b), func(c)

    with tf.device("cpu"):
        a = v1.placeholder(np.float16, [64, 64])
        b = v1.placeholder(np.float16, [64, 64])
        c = v1.placeholder(np.float32, [64, 64])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(body, inputs=[a, b, c])
    result = _run(res, {a: -np.ones([64, 64]), b: np.ones([64, 64]), c: 2 * np.ones([64, 64])})
    np.testing.assert_array_equal(result[0], np.zeros([64, 64]))
    np.testing.assert_array_equal(result[1], np.ones([64, 64]))
    np.testing.assert_array_equal(result[2], 2 * np.ones([64, 64]))
    assert [r.dtype for r in result] == [np.float16, np.float16, np.float32]


@pytest.mark.follows("testSingleFunctionElided")
def test_single_function_elided(tf1_graph, configure):
    configure()

    @ipu.outlined_function
    def func(a):
        return tf.nn.relu(a)

    with tf.device("cpu"):
        a = v1.placeholder(np.float16, [64, 64])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(lambda a: func(a), inputs=[a])
    values = np.linspace(-2, 2, 64 * 64).reshape(64, 64).astype(np.float16)
    result = _run(res, {a: values})
    np.testing.assert_array_equal(result[0], np.maximum(values, 0))


@pytest.mark.follows("testNoGradient")
def test_no_gradient(tf1_graph, configure):
    configure()

    @ipu.outlined_function
    def func(lhs, rhs):
        @tf.custom_gradient
        def f(a, b):
            def grad(dy):
                return [None, dy - b]

            return a, grad

        return f(lhs, rhs)

    def body(a):
        with v1.variable_scope("vs", use_resource=True):
            w0 = _ones_variable("w0", [64, 64])
        return tf.gradients(func(a, w0), [w0])

    with tf.device("cpu"):
        a = v1.placeholder(np.float32, [64, 64])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(body, inputs=[a])
    result = _run(res, {a: np.ones([64, 64])})
    np.testing.assert_allclose(result[0], np.zeros([64, 64]))


@pytest.mark.follows("testInputsWithAliasing")
def test_inputs_with_aliasing(tf1_graph, configure):
    configure()

    @ipu.outlined_function
    def func(x):
        return tf.sigmoid(x)

    def body(a, b):
        return func(tf.broadcast_to(a, shape=[1024])) - func(tf.broadcast_to(b, shape=[1024]))

    with tf.device("cpu"):
        a = v1.placeholder(np.float32, [])
        b = v1.placeholder(np.float32, [])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(body, inputs=[a, b])
    result = _run(res, {a: 1.0, b: 0.5})
    np.testing.assert_allclose(result[0], np.full([1024], _sigmoid(1.0) - _sigmoid(0.5)), rtol=1e-6)


@pytest.mark.follows("testOutlinedFunctionInFunction")
def test_outlined_function_in_function(configure):
    @ipu.outlined_function
    def identity(x):
        return x

    @tf.function(jit_compile=True)
    def f(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            z = identity(x)
        return tape.gradient(z, x)

    configure()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        x = tf.random.normal((1, 10))
        dfdx = strategy.run(f, [x])
    np.testing.assert_array_equal(dfdx, np.ones((1, 10)))


@pytest.mark.follows("testKerasCustomLayerWithOutlinedFunction")
def test_keras_custom_layer_with_outlined_function(configure):
    class CustomLayer(tf.keras.layers.Layer):
        def __init__(self, **kwargs):
            self.dense = tf.keras.layers.Dense(units=4)
            super().__init__(**kwargs)

        def build(self, input_shape):
            self.dense.build(input_shape)
            super().build(input_shape)

        def call(self, inputs):
            @ipu.outlined_function
            def inner_call():
                return self.dense(inputs)

            return inner_call()

    configure(auto_select_ipus=1)
    micro_batch_size = 4
    ds = tf.data.Dataset.from_tensor_slices(
        ([1.0] * micro_batch_size * 4, [2.0] * micro_batch_size * 4)
    ).batch(micro_batch_size, drop_remainder=True)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        input_layer = tf.keras.Input(shape=1, batch_size=micro_batch_size)
        model = tf.keras.Model(input_layer, CustomLayer()(input_layer))
        model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy())
        history = model.fit(ds, batch_size=micro_batch_size)
    assert np.isfinite(history.history["loss"]).all()


def _transpose_program(inner_takes_perm: bool):
    """A program whose transpose permutation is a captured constant or a parameter."""

    def body(tensor):
        const_value = tf.identity([1, 0])
        if inner_takes_perm:

            @ipu.outlined_function
            def func(tensor, perm):
                return tf.transpose(tensor, perm=perm)

            return func(tensor, const_value)

        @ipu.outlined_function
        def inner(tensor):
            return tf.transpose(tensor, perm=const_value)

        return inner(tensor)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        tensor = v1.placeholder(np.float32, [4, 1])
        res = ipu.ipu_compiler.compile(body, inputs=[tensor])
    return tensor, res


@pytest.mark.follows("testOutlineWithConstCapture")
def test_outline_with_const_capture(tf1_graph, configure):
    configure()
    tensor, res = _transpose_program(inner_takes_perm=False)
    result = _run(res, {tensor: [[1.0], [2.0], [3.0], [4.0]]})
    np.testing.assert_array_equal(result[0], [[1.0, 2.0, 3.0, 4.0]])


@pytest.mark.follows("testOutlineWithConstParam")
@pytest.mark.xfail(
    strict=True,
    reason="difference: an outlined function's parameters are not a call boundary here, so a "
    "permutation passed as a parameter is still a compile-time constant and the transpose "
    "compiles; the original refuses it (a parameter is a runtime value). Making the function "
    "a real TensorFlow call would not change that: XLA resolves a constant argument through "
    "a call (even a _noinline one) and a graph needs no constant",
)
def test_outline_with_const_param(tf1_graph, configure):
    configure()
    tensor, res = _transpose_program(inner_takes_perm=True)
    with pytest.raises(Exception):  # noqa: B017  The original expects any error.
        _run(res, {tensor: [[1.0], [2.0], [3.0], [4.0]]})


def _check_grad_with_const(inner_func):
    def body(tensor):
        w0 = v1.Variable([[1], [2], [3], [4]], dtype=np.float32)
        loss = tf.reduce_mean(inner_func(tensor, w0))
        return v1.train.GradientDescentOptimizer(0.001).minimize(loss)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        tensor = v1.placeholder(np.float32, [4, 1])
        res = ipu.ipu_compiler.compile(body, inputs=[tensor])
    with tu.ipu_session() as sess:
        tu.move_variable_initialization_to_cpu()
        sess.run(v1.global_variables_initializer())
        sess.run(res, {tensor: [[1.0], [2.0], [3.0], [4.0]]})
        (w0,) = sess.run(v1.global_variables())
    # loss = mean(w0 @ t^T); d loss / d w0[i] = sum(t) / 16 = 10 / 16.
    np.testing.assert_allclose(w0, np.array([[1], [2], [3], [4]]) - 0.001 * 10 / 16, rtol=1e-6)


@pytest.mark.follows("testOutlineGradWithConstCapture")
def test_outline_grad_with_const_capture(tf1_graph, configure):
    configure()

    def func(tensor, other):
        const_value = tf.identity([1, 0])

        @ipu.outlined_function
        def inner(tensor, other):
            return tf.matmul(other, tf.transpose(tensor, perm=const_value))

        return inner(tensor, other)

    _check_grad_with_const(func)


@pytest.mark.follows("testOutlineGradWithIntermediateConst")
def test_outline_grad_with_intermediate_const(tf1_graph, configure):
    configure()

    @ipu.outlined_function
    def func(tensor, other):
        const_value = tf.identity([1, 0])
        return tf.matmul(other, tf.transpose(tensor, perm=const_value))

    _check_grad_with_const(func)
