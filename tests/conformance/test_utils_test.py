"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/utils_test.py`.

TF1 programs with `ipu.utils` helpers: a while loop (an LSTM) trained inside
`ipu_compiler.compile`, `move_variable_initialization_to_cpu` (initializers run on the
host, except those reading a resource that an IPU computation also uses), variables on a
second IPU initialized by the host, two `ipu_scope`s in one program and `reset_ipu_seed`.
The original counts compilations and executions in Poplar's event trace, which only its
backend produces; here the same programs are checked by their results and by where their
operations are placed. `testEventFetchAndStringDecode` reads nothing but that trace.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1


@pytest.fixture
def configure():
    """Configures the emulated system as the test asks; resets it afterwards."""

    def configure_system(ipus: int | None = None):
        config = ipu.config.IPUConfig()
        config.ipu_model.compile_ipu_code = False
        if ipus is not None:
            config.auto_select_ipus = ipus
        config.configure_ipu_system()

    yield configure_system
    ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testIpuWhileScope")
@pytest.mark.xfail(
    strict=True,
    reason="difference: inside ipu_compiler.compile under ipu_scope('/device:IPU:0') an "
    "operation's `device` is the emulating host device ('/device:CPU:0'), not "
    "'/device:IPU:0' (the training itself converges as on the original)",
)
def test_ipu_while_scope(tf1_graph, configure):
    def my_net(a, b):
        c = v1.get_variable("c", initializer=[1.0])
        assert "ResourceVariable" in str(type(c))
        cell = v1.nn.rnn_cell.LSTMCell(1, forget_bias=1.0)
        outputs, _ = v1.nn.dynamic_rnn(cell, a, dtype=np.float32)
        logits = outputs[-1] * c
        assert logits.device == "/device:IPU:0"
        loss = v1.losses.mean_squared_error(tf.reshape(logits, [1, 8, 1]), b)
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        return [loss, train]

    with tf.device("cpu"):
        a = v1.placeholder(np.float32, [1, 8, 1], name="a")
        b = v1.placeholder(np.float32, [1, 8, 1], name="b")
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        loss = ipu.ipu_compiler.compile(my_net, inputs=[a, b])
    configure()

    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        feed = {a: np.ones([1, 8, 1]), b: np.ones([1, 8, 1])}
        initial = sess.run(loss, feed)
        for _ in range(100):
            sess.run(loss, feed)
        final = sess.run(loss, feed)
    assert final[0] < initial[0]


def _initializer_ops(graph):
    """The operations the global variables initializer runs (its inputs, transitively)."""
    seen, stack = set(), [v1.global_variables_initializer()]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack += [tensor.op for tensor in op.inputs] + list(op.control_inputs)
    return seen


@pytest.mark.follows("testInitializerDeviceChange")
def test_initializer_device_change(tf1_graph, configure):
    inp = v1.placeholder(np.float32, [1, 8, 8, 4])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        tf.keras.layers.Conv2D(8, 1)(inp)
    ipu.utils.move_variable_initialization_to_cpu()
    configure()

    # The original sees no IPU event while the initializer runs: it runs on the host.
    initializer_ops = _initializer_ops(tf1_graph)
    computing = [op for op in initializer_ops if op.type not in ("NoOp", "VarHandleOp")]
    assert computing
    for op in computing:
        assert "CPU" in op.device.upper(), (op.name, op.device)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        kernel = [v for v in v1.global_variables() if "kernel" in v.name][0]
        assert sess.run(kernel).shape == (1, 1, 4, 8)


@pytest.mark.follows("testInitializerThatUsesIPUResourceDeviceChange")
def test_initializer_that_uses_ipu_resource_device_change(tf1_graph, configure):
    var_val = np.ones([1, 8, 8, 4])

    def graph():
        var = v1.Variable(var_val, dtype=np.float32)
        # Its initializer reads another variable, which the IPU computation also reads.
        var_copy = v1.Variable(var.initialized_value())
        return var * var_copy

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(graph)
    ipu.utils.move_variable_initialization_to_cpu()
    configure()

    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        (result,) = sess.run(compiled)
    np.testing.assert_allclose(result, var_val * var_val)


@pytest.mark.follows("testVarsInitializedByStreamsAreLoggedAsOnDevice")
def test_vars_initialized_by_streams_are_logged_as_on_device(tf1_graph, configure):
    w_val1 = np.array([1, 2, 3, 4])
    w_val2 = np.array([4, 3, 2, 1])
    w_val3 = np.array([9, 0, 9, 0])
    with tf.device("/device:IPU:1"):
        with v1.variable_scope("vs", use_resource=True):
            ws = [
                v1.get_variable(
                    name,
                    shape=[4],
                    dtype=np.float32,
                    initializer=v1.constant_initializer(value, dtype=np.float32),
                )
                for name, value in (("w1", w_val1), ("w2", w_val2), ("w3", w_val3))
            ]
        y = ws[0] + ws[1] + ws[2]
    ipu.utils.move_variable_initialization_to_cpu()
    configure(2)

    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _ in range(3):
            np.testing.assert_allclose(sess.run(y), w_val1 + w_val2 + w_val3)


@pytest.mark.follows("testMultiScopeTest")
def test_multi_scope(tf1_graph, configure):
    with tf.device("cpu"):
        x = v1.placeholder(np.float32, [2, 2])
        y = v1.placeholder(np.float32, [2, 2])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        z = tf.matmul(x, y)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        z2 = tf.matmul(x, z)
    configure()

    with v1.Session() as sess:
        result = sess.run(z2, {x: np.ones([2, 2]), y: np.ones([2, 2])})
    np.testing.assert_array_equal(result, [[4, 4], [4, 4]])


@pytest.mark.follows("testResetSeedTest")
def test_reset_seed(tf1_graph, configure):
    with tf.device("cpu"):
        x = v1.placeholder(np.float32, [2, 2])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        z = tf.cast(x, dtype=np.float16)
    configure()

    with v1.Session() as sess:
        result = sess.run(z, {x: [[1.0, 1.0], [1.0, 1.0]]})
        np.testing.assert_array_equal(result, [[1.0, 1.0], [1.0, 1.0]])
        ipu.utils.reset_ipu_seed(1)
        result = sess.run(z, {x: [[2.0, 2.0], [2.0, 2.0]]})
        np.testing.assert_array_equal(result, [[2.0, 2.0], [2.0, 2.0]])
