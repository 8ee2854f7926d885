"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/map_gradient_optimizer_test.py`.

`MapGradientOptimizer` maps each gradient with `map_fn(grad, var)` before the wrapped
optimizer uses it: squares, clipping to [7, 14], weight decay, a lambda, and a
`minimize` step. TF1 graphs, as the original's. The expected gradients are the
analytic gradients of the losses mapped in numpy (the original's figures).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.ipu.optimizers import map_gradient_optimizer

v1 = tf.compat.v1
MapGradientOptimizer = map_gradient_optimizer.MapGradientOptimizer
WEIGHT_DECAY = 0.01


def _mapped_gradients(values, loss_fn, map_fn):
    variables = [tf.Variable([v], dtype=tf.float32) for v in values]
    optimizer = MapGradientOptimizer(v1.train.GradientDescentOptimizer(3.0), map_fn)
    grads_and_vars = optimizer.compute_gradients(loss_fn(*variables), variables)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        return [sess.run(grad) for grad, _ in grads_and_vars]


def _pairwise(x, y, z):
    return x * y + x * z + y * z


def _pairwise_gradients(x, y, z):  # d/dx, d/dy, d/dz of xy + xz + yz
    return np.array([y + z, x + z, x + y], np.float32)


@pytest.mark.follows("testMapGradientOptimizer")
def test_map_gradient_optimizer(tf1_graph):
    got = _mapped_gradients([1.0, 2.0, 3.0], lambda x, y, z: x + y + z, lambda g, v: tf.square(g))
    np.testing.assert_allclose(np.ravel(got), [1, 1, 1])


@pytest.mark.follows("testMapGradientDecentWithSquare")
def test_map_gradient_descent_with_square(tf1_graph):
    got = _mapped_gradients(
        [1.0, 1.0, 1.0], lambda x, y, z: x * x + y + z, lambda g, v: tf.square(g)
    )
    np.testing.assert_allclose(np.ravel(got), np.square([2 * 1.0, 1, 1]))  # 4, 1, 1


@pytest.mark.follows("testMapGrandientDescentWithSquare2")
def test_map_gradient_descent_with_square2(tf1_graph):
    got = _mapped_gradients([1.0, 2.0, 3.0], _pairwise, lambda g, v: tf.square(g))
    np.testing.assert_allclose(np.ravel(got), np.square(_pairwise_gradients(1, 2, 3)))  # 25, 16, 9


@pytest.mark.follows("testLambda")
def test_lambda(tf1_graph):
    got = _mapped_gradients(
        [1.0, 2.0, 3.0], _pairwise, lambda grad_lamb, var_lamb: tf.square(grad_lamb)
    )
    np.testing.assert_allclose(np.ravel(got), [25, 16, 9])


@pytest.mark.follows("testClipGradientOptimizer")
def test_clip_gradient_optimizer(tf1_graph):
    got = _mapped_gradients([1, 5, 10], _pairwise, lambda g, v: tf.clip_by_value(g, 7, 14))
    np.testing.assert_allclose(
        np.ravel(got), np.clip(_pairwise_gradients(1, 5, 10), 7, 14)
    )  # 14, 11, 7


@pytest.mark.follows("testWeightDecay")
def test_weight_decay(tf1_graph):
    got = _mapped_gradients([1, 5, 10], _pairwise, lambda g, v: g + WEIGHT_DECAY * v)
    expected = _pairwise_gradients(1, 5, 10) + WEIGHT_DECAY * np.array([1, 5, 10], np.float32)
    np.testing.assert_allclose(np.ravel(got), expected, rtol=1e-6)  # 15.01, 11.05, 6.1


@pytest.mark.follows("testMinimize")
def test_minimize(tf1_graph):
    variables = [tf.Variable([v], dtype=tf.float32) for v in (1, 2, 3)]
    optimizer = MapGradientOptimizer(
        v1.train.GradientDescentOptimizer(1.0), lambda g, v: tf.square(g)
    )
    train = optimizer.minimize(tf.reduce_prod(variables), var_list=variables)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        sess.run(train)
        weights = sess.run(variables)
    # dL/dv of abc = (6, 3, 2), squared (36, 9, 4), one step of rate 1 from (1, 2, 3).
    np.testing.assert_allclose(np.ravel(weights), [-35.0, -7.0, -1.0])
