"""internal_ops: print_tensor prints to standard error; remaps are copies."""

import numpy as np
import tensorflow as tf

from openipu._src.ops import internal_ops


def test_print_tensor_prints_to_stderr_eagerly(capfd):
    internal_ops.print_tensor(tf.constant([1, 2, 3]), name="my_tensor")
    assert "my_tensor: [1 2 3]" in capfd.readouterr().err


def test_print_tensor_in_a_function_prints_when_run(capfd):
    @tf.function
    def model(v):
        print_op = internal_ops.print_tensor(v)
        with tf.control_dependencies([print_op]):
            return v + 1

    np.testing.assert_array_equal(model(tf.constant([[5, 6]])), [[6, 7]])
    assert "[[5 6]]" in capfd.readouterr().err


def test_print_tensor_returns_a_runnable_op_in_a_graph(tf1_graph, capfd):
    placeholder = tf.compat.v1.placeholder(tf.float32, [2])
    print_op = internal_ops.print_tensor(placeholder)
    with tf.compat.v1.Session() as session:
        session.run(print_op, {placeholder: [0.5, 1.5]})
    assert "[0.5 1.5]" in capfd.readouterr().err


def test_remap_and_remap_deduce_copy_their_input():
    x = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4))
    for op in (internal_ops.remap, internal_ops.remap_deduce):
        np.testing.assert_array_equal(op(x), x)
        np.testing.assert_array_equal(tf.function(op, jit_compile=True)(x), x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(op(x) * 2.0)
        np.testing.assert_array_equal(tape.gradient(y, x), np.full((3, 4), 2.0))
