"""functional_ops.outlined_function: the numbers of calling the function, and its rules."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import functional_ops


def _body(x, y):
    return tf.matmul(x, y) + 1.0, tf.reduce_sum(x)


def test_outlined_function_with_and_without_arguments():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.ones((3, 2), np.float32)
    expected = _body(x, y)
    for outlined in (
        functional_ops.outlined_function(_body),
        functional_ops.outlined_function(unique_sharding=True, keep_input_layouts=False)(_body),
    ):
        for got, want in zip(outlined(x, y), expected, strict=True):
            np.testing.assert_allclose(got, want)


def test_outlined_function_called_twice_in_a_compiled_function():
    layer = functional_ops.outlined_function(lambda v: tf.nn.relu(v * 2.0 - 1.0))

    @tf.function(jit_compile=True)
    def model(v):
        return layer(layer(v))

    np.testing.assert_allclose(model(tf.constant([0.0, 1.0, 2.0])), [0.0, 1.0, 5.0])


def test_outlined_function_is_differentiable():
    square = functional_ops.outlined_function(lambda v: v * v)
    x = tf.constant([1.0, -3.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(square(x))
    np.testing.assert_allclose(tape.gradient(y, x), [2.0, -6.0])


def test_outlined_function_takes_positional_arguments_only():
    outlined = functional_ops.outlined_function(_body)
    with pytest.raises(TypeError):
        outlined(tf.ones([1, 1]), y=tf.ones([1, 1]))


def test_outlined_function_may_return_nothing():
    """A function that only updates a variable returns None, which the original allows."""
    counter = tf.Variable(1.0)

    @functional_ops.outlined_function
    def add(value):
        counter.assign_add(tf.reduce_sum(value))

    assert add(tf.ones([3])) is None
    assert float(counter.numpy()) == 4.0


def test_outlined_function_checks_its_options():
    # As the original (a bool attribute of its Function op): checked when called.
    outlined = functional_ops.outlined_function(_body, unique_sharding="yes")
    with pytest.raises(TypeError, match="unique_sharding must be a bool, got 'yes'"):
        outlined(tf.ones([2, 2]), tf.ones([2, 2]))
