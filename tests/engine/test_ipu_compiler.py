"""`ipu_compiler.compile` (spec 21.2): return rules, TF1 sessions and TF2, and error E1."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _session_run(graph, fetches, feed_dict=None, init=True):
    with tf.compat.v1.Session(graph=graph) as session:
        if init:
            session.run(tf.compat.v1.global_variables_initializer())
        return session.run(fetches, feed_dict)


def test_compile_outside_an_ipu_device_raises(ipu_system, tf1_graph):
    with pytest.raises(ValueError, match="must be called for an IPU device"):
        ipu.ipu_compiler.compile(lambda: tf.constant(1.0), [])


def test_a_computation_placing_itself_on_an_ipu_needs_no_scope(tf1_graph):
    # As the original: the device scope may be inside the computation, and the program may be
    # built before the configuration; a refused computation leaves no program to finish.
    x = tf.compat.v1.placeholder(np.float32, [2])
    with pytest.raises(ValueError, match="not placed on an IPU device"):
        ipu.ipu_compiler.compile(lambda a: a * 3.0, [x])

    def placed(a):
        with tf.device("/device:IPU:0"):
            return a * 2.0

    result = ipu.ipu_compiler.compile(placed, [x])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    try:
        got = _session_run(tf1_graph, result, {x: [1.0, 2.0]})
    finally:
        ipu.config.reset_ipu_configuration()
    np.testing.assert_array_equal(got[0], [2.0, 4.0])


def test_compile_in_a_plain_ipu_device_scope(ipu_system, tf1_graph):
    # As the original: `tf.device('/device:IPU:0')` (also under a job's scope) is an IPU scope.
    x = tf.compat.v1.placeholder(np.float32, [2])
    with tf.device("/job:localhost/task:0"), tf.device("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(lambda a: a * 2.0, [x])
    np.testing.assert_array_equal(_session_run(tf1_graph, result, {x: [1.0, 2.0]})[0], [2.0, 4.0])


@pytest.mark.parametrize(
    "computation, check",
    [
        (lambda x: x * 2, lambda r: isinstance(r, list) and len(r) == 1),
        (lambda x: (x * 2, x * 3), lambda r: isinstance(r, list) and len(r) == 2),
        (lambda x: None, lambda r: isinstance(r, tf.Operation)),
        (lambda x: tf.no_op(), lambda r: isinstance(r, tf.Operation)),
        (lambda x: [x + 1, tf.no_op()], lambda r: isinstance(r, list) and len(r) == 1),
    ],
    ids=["single-value", "tuple", "none", "op-only", "tensor-then-op"],
)
def test_return_rules(ipu_system, tf1_graph, computation, check):
    x = tf.constant(3.0)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(computation, [x])
    assert check(result)
    values = _session_run(tf1_graph, result)
    if isinstance(result, list):
        assert values[0] in (6.0, 4.0)


def test_nested_output_structure_is_kept(ipu_system, tf1_graph):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(
            lambda a: {"a": a, "b": (a + 1, a * 2)}, [tf.constant(2.0)]
        )
    assert _session_run(tf1_graph, result) == {"a": 2.0, "b": (3.0, 4.0)}


def test_operation_before_tensor_is_refused(ipu_system, tf1_graph):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        with pytest.raises(ValueError, match="tensor came after an operation"):
            ipu.ipu_compiler.compile(lambda x: [tf.no_op(), x], [tf.constant(1.0)])


def test_n_dimensional_list_input_becomes_scalars(ipu_system, tf1_graph):
    seen = {}

    def computation(rows):
        seen["shapes"] = [[t.shape.rank for t in row] for row in rows]
        return tf.add_n([t for row in rows for t in row])

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(computation, [[[1.0, 2.0], [3.0, 4.0]]])
    assert seen["shapes"] == [[0, 0], [0, 0]]
    assert _session_run(tf1_graph, result) == [10.0]


def test_tf1_training_loop_matches_numpy(ipu_system, tf1_graph):
    """A TF1 program: variables and an optimizer built inside the compiled loop."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(8, 4, 3)).astype(np.float32)
    labels = rng.normal(size=(8, 4, 1)).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    learning_rate = 0.1

    def body(loss, x, y):
        with tf.compat.v1.variable_scope("model", use_resource=True):
            w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.ones_initializer())
        prediction = tf.matmul(x, w)
        new_loss = tf.reduce_mean(tf.square(prediction - y))
        train = tf.compat.v1.train.GradientDescentOptimizer(learning_rate).minimize(new_loss)
        with tf.control_dependencies([train]):
            return tf.identity(new_loss)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(8, body, [0.0], infeed), [])
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        session.run(infeed.initializer)
        session.run(tf.compat.v1.global_variables_initializer())
        (final_loss,) = session.run(result)
        (w_value,) = session.run(
            [v for v in tf.compat.v1.global_variables() if "model/w" in v.name]
        )

    w = np.ones((3, 1), np.float32)
    for x, y in zip(features, labels, strict=True):
        error = x @ w - y
        expected_loss = np.mean(error**2)
        w = w - learning_rate * (2 / error.size) * x.T @ error
    np.testing.assert_allclose(final_loss, expected_loss, rtol=1e-5)
    np.testing.assert_allclose(w_value, w, rtol=1e-5)


def test_compile_in_tf2_eager(ipu_system):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        (result,) = ipu.ipu_compiler.compile(lambda a, b: a @ b, [tf.eye(2), tf.ones([2, 2])])
    np.testing.assert_array_equal(result.numpy(), np.ones([2, 2]))


def test_compile_before_configuration_is_allowed_as_on_the_original(tf1_graph):
    # The original builds TF1 graphs before configure_ipu_system; the program is finished
    # when the graph first runs (tests/replication/test_tf1_programs_as_written.py).
    from openipu._src.system import configure

    configure.reset_ipu_configuration()
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(lambda x: x + 5.0, [tf.ones([2])])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    try:
        np.testing.assert_array_equal(_session_run(tf1_graph, result)[0], [6.0, 6.0])
    finally:
        ipu.config.reset_ipu_configuration()


def test_pre_compile_connection_returns_zeros(tf1_graph):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.device_connection.type = ipu.config.DeviceConnectionType.PRE_COMPILE
    config.device_connection.version = "ipu2"
    config.configure_ipu_system()
    try:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            result = ipu.ipu_compiler.compile(lambda x: x + 5.0, [tf.ones([2])])
        np.testing.assert_array_equal(_session_run(tf1_graph, result)[0], [0.0, 0.0])
    finally:
        ipu.config.reset_ipu_configuration()


def test_never_connection_refuses_to_run(tf1_graph):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.device_connection.type = ipu.config.DeviceConnectionType.NEVER
    config.device_connection.version = "ipu2"
    config.configure_ipu_system()
    try:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            # The original's error (poplar_executable.cc: InvalidArgument).
            with pytest.raises(tf.errors.InvalidArgumentError, match="compilation only"):
                ipu.ipu_compiler.compile(lambda x: x + 5.0, [tf.ones([2])])
    finally:
        ipu.config.reset_ipu_configuration()


TF1_PROGRAM = """
import numpy as np
import tensorflow as tf
from tensorflow.python import ipu
tf.compat.v1.disable_v2_behavior()
cfg = ipu.config.IPUConfig(); cfg.auto_select_ipus = 1; cfg.configure_ipu_system()
v = tf.compat.v1.placeholder(np.float32, [4, 4])
outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
def body(v):
    v = v + 1
    outfeed = outfeed_queue.enqueue(v)
    return (v, outfeed)
def my_net(v):
    return ipu.loops.repeat(20, body, (v))
with ipu.scopes.ipu_scope("/device:IPU:0"):
    res = ipu.ipu_compiler.compile(my_net, inputs=[v])
outfeed = outfeed_queue.dequeue()
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    result = sess.run(res, {v: np.ones([4, 4], np.float32)})
    outfed = sess.run(outfeed)
assert outfed.shape == (20, 4, 4), outfed.shape
np.testing.assert_array_equal(result[0], np.full([4, 4], 21.0))
np.testing.assert_array_equal(outfed[:, 0, 0], np.arange(2, 22))
print("ok")
"""


@pytest.mark.slow
def test_spec_outfeed_example_in_a_real_tf1_program(tmp_path):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", TF1_PROGRAM], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
