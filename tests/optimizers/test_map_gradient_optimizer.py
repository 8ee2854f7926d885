"""MapGradientOptimizer: the spec's worked example (5.01, 4.02, 3.03) and training with it."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.optimizers.map_gradient_optimizer import MapGradientOptimizer

WEIGHT_DECAY = 0.01


def map_fn_decay(grad, var):
    return grad + (WEIGHT_DECAY * var)


def test_spec_example_in_a_tf1_graph(tf1_graph):
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.000001)
    map_optimizer = MapGradientOptimizer(optimizer, map_fn_decay)
    vars_ = [tf.Variable([v], dtype=tf.float32) for v in (1.0, 2.0, 3.0)]
    grads_and_vars = map_optimizer.compute_gradients(
        vars_[0] * vars_[1] + vars_[0] * vars_[2] + vars_[1] * vars_[2], vars_
    )
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        grads = [session.run(g) for g, _ in grads_and_vars]
    np.testing.assert_allclose(np.concatenate(grads), [5.01, 4.02, 3.03], rtol=1e-6)


def test_without_the_map_the_gradients_are_plain(tf1_graph):
    vars_ = [tf.Variable([v], dtype=tf.float32) for v in (1.0, 2.0, 3.0)]
    loss = vars_[0] * vars_[1] + vars_[0] * vars_[2] + vars_[1] * vars_[2]
    plain = MapGradientOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1), lambda g, v: g)
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        grads = session.run([g for g, _ in plain.compute_gradients(loss, vars_)])
    np.testing.assert_allclose(np.concatenate(grads), [5.0, 4.0, 3.0])


@pytest.mark.parametrize("jit_compile", [False, True])
def test_minimize_applies_the_mapped_gradients(jit_compile):
    w = tf.Variable([1.0, -2.0])
    optimizer = MapGradientOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1), map_fn_decay)

    @tf.function(jit_compile=jit_compile)
    def step():
        optimizer.minimize(tf.reduce_sum(w**2), var_list=[w])

    expected = np.array([1.0, -2.0])
    for _ in range(3):
        step()
        expected = expected - 0.1 * (2 * expected + WEIGHT_DECAY * expected)
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-6)


def test_over_a_keras_optimizer_in_eager_mode():
    w = tf.Variable([1.0, 2.0])
    optimizer = MapGradientOptimizer(tf_keras.optimizers.SGD(0.1), lambda g, v: 2.0 * g)
    grads_and_vars = optimizer.compute_gradients(lambda: tf.reduce_sum(w * w), [w])
    np.testing.assert_allclose(grads_and_vars[0][0], [4.0, 8.0])
    optimizer.apply_gradients(grads_and_vars)
    np.testing.assert_allclose(w.numpy(), [0.6, 1.2], rtol=1e-6)


def test_variables_without_gradients_are_mapped_too(tf1_graph):
    # As the original (map_gradient_optimizer.py:98-101): the map is called for every pair,
    # a None gradient included, and its result is the pair's gradient.
    used, unused = tf.Variable(1.0), tf.Variable(2.0)
    optimizer = MapGradientOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1),
        lambda g, v: WEIGHT_DECAY * v if g is None else g * 3,
    )
    pairs = optimizer.compute_gradients(used * 2.0, [used, unused])
    assert [v for _, v in pairs] == [used, unused]
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        grads = session.run([g for g, _ in pairs])
    np.testing.assert_allclose(grads, [6.0, 0.02], rtol=1e-6)


def test_a_map_that_keeps_none_keeps_none(tf1_graph):
    used, unused = tf.Variable(1.0), tf.Variable(2.0)
    optimizer = MapGradientOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), lambda g, v: g
    )
    pairs = optimizer.compute_gradients(used * 2.0, [used, unused])
    assert pairs[1] == (None, unused)


def test_a_map_that_cannot_take_none_fails(tf1_graph):
    used, unused = tf.Variable(1.0), tf.Variable(2.0)
    optimizer = MapGradientOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), lambda g, v: g * 3
    )
    with pytest.raises(TypeError, match="NoneType"):
        optimizer.compute_gradients(used * 2.0, [used, unused])


def test_the_map_must_be_callable():
    # As the original: kept unchecked when built, called (Python's error) when gradients
    # are computed; applying gradients does not call it.
    optimizer = MapGradientOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1), 0.01)
    w = tf.Variable([1.0, 2.0])
    with pytest.raises(TypeError, match="^'float' object is not callable$"):
        optimizer.compute_gradients(lambda: tf.reduce_sum(w * w), var_list=[w])
    optimizer.apply_gradients([(tf.ones([2]), w)])
    np.testing.assert_allclose(w.numpy(), [0.9, 1.9])
