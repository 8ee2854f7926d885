"""control_flow_ops.barrier: same values, every output depends on every input."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import control_flow_ops


def test_barrier_returns_the_same_structure_and_values():
    structure = {"a": tf.constant([1.0, 2.0]), "b": (tf.constant(3), [tf.constant([[4.0]])])}
    got = control_flow_ops.barrier(structure)
    tf.nest.assert_same_structure(got, structure)
    for ours, theirs in zip(tf.nest.flatten(got), tf.nest.flatten(structure), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_barrier_outputs_wait_for_all_inputs(tf1_graph):
    a = tf.compat.v1.placeholder(tf.float32, [])
    f = tf.compat.v1.placeholder(tf.float32, [])
    f_out, a_out = control_flow_ops.barrier([f, a])
    for output in (f_out, a_out):
        dependencies = {op.name for op in output.op.control_inputs}
        dependencies |= {t.op.name for t in output.op.inputs}
        assert {a.op.name, f.op.name} <= dependencies


def test_barrier_spec_example_in_a_compiled_function():
    @tf.function(jit_compile=True)
    def func(a, b, c, d):
        e = a + b
        f = c + d
        f, a = control_flow_ops.barrier([f, a])
        g = e + a
        return f, g

    f, g = func(1.0, 2.0, 3.0, 4.0)
    assert (f.numpy(), g.numpy()) == (7.0, 4.0)


@pytest.mark.parametrize("insert_barrier_for_gradients", [False, True])
def test_barrier_gradients_are_unchanged(insert_barrier_for_gradients):
    x = tf.constant([1.0, 2.0])
    y = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch([x, y])
        bx, by = control_flow_ops.barrier(
            (x, y), insert_barrier_for_gradients=insert_barrier_for_gradients
        )
        loss = tf.reduce_sum(bx**2) * by
    grad_x, grad_y = tape.gradient(loss, [x, y])
    np.testing.assert_allclose(grad_x, 2 * x.numpy() * 3.0)
    np.testing.assert_allclose(grad_y, 5.0)
