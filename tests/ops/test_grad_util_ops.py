"""Capturing upstream gradients (`ipu.ops.grad_util_ops`, `ipu.eager.backprop`), as the
original's docstrings use them, against gradients computed by hand and by tf.GradientTape."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.eager.backprop import GradientCaptureContext, GradientCaptureTape
from tensorflow.python.ipu.ops.grad_util_ops import capture_upstream_gradients


def test_tape_captures_the_gradient_flowing_into_a_tensor():
    x = tf.Variable(0.5)
    with GradientCaptureTape() as tape:
        o = x**2
        p = capture_upstream_gradients(o, tag="tanh_grad")
        y = tf.tanh(p)
    grad_x = tape.gradient(y, x)
    (captured,) = tape.captured_gradients["tanh_grad"]
    tanh_grad = 1.0 - np.tanh(0.25) ** 2  # dy/dp at p = 0.25
    np.testing.assert_allclose(captured, tanh_grad, rtol=1e-6)
    np.testing.assert_allclose(grad_x, tanh_grad * 2 * 0.5, rtol=1e-6)


def test_context_captures_nested_structures_in_a_compiled_program(ipu_system):
    weights = tf.Variable([[1.0, -2.0], [0.5, 3.0]])

    @tf.function(experimental_compile=True)
    def program(x):
        with GradientCaptureContext() as context:
            with tf.GradientTape() as tape:
                h = tf.matmul(x, weights)
                a, b = capture_upstream_gradients((h, h * 2.0), tag="pair")
                loss = tf.reduce_sum(tf.nn.relu(a)) + tf.reduce_sum(b**2)
            grad = tape.gradient(loss, weights)
        return grad, context.captured_gradients["pair"]

    x = np.array([[1.0, 2.0]], np.float32)
    grad, (grad_a, grad_b) = ipu.ipu_strategy.IPUStrategy().run(program, args=(x,))
    h = x @ weights.numpy()
    np.testing.assert_allclose(grad_a, (h > 0).astype(np.float32))
    np.testing.assert_allclose(grad_b, 2 * (2 * h))
    with tf.GradientTape() as reference_tape:
        h = tf.matmul(x, weights)
        reference = tf.reduce_sum(tf.nn.relu(h)) + tf.reduce_sum((h * 2.0) ** 2)
    np.testing.assert_allclose(grad, reference_tape.gradient(reference, weights))


def test_forward_pass_is_the_identity():
    values = {"a": tf.constant([1.0, 2.0]), "b": [tf.constant(3)]}
    result = capture_upstream_gradients(values, tag="t")
    np.testing.assert_array_equal(result["a"], [1.0, 2.0])
    assert int(result["b"][0]) == 3


def test_gradient_outside_a_capture_context_is_an_error():
    # A context's frame stays until its gradients are read or it is collected (as in the
    # original), and frames are per thread: a thread of its own has none that earlier
    # tests left behind.
    raised: list[BaseException] = []

    def gradient_outside() -> None:
        x = tf.Variable(1.0)
        with tf.GradientTape() as tape:
            y = capture_upstream_gradients(x * 3.0, tag="outside")
        try:
            tape.gradient(y, x)
        except RuntimeError as error:
            raised.append(error)

    thread = threading.Thread(target=gradient_outside)
    thread.start()
    thread.join()
    assert len(raised) == 1
    assert "may only be used within the context of" in str(raised[0])


def test_a_tag_captured_twice_is_an_error():
    x = tf.Variable(1.0)
    with GradientCaptureTape() as tape:
        y = capture_upstream_gradients(x, tag="same") + capture_upstream_gradients(x, tag="same")
    with pytest.raises(ValueError, match="Gradient exists in the captured grads frame"):
        tape.gradient(y, x)


def test_captured_gradients_are_read_only():
    with GradientCaptureTape() as tape:
        pass
    with pytest.raises(ValueError, match="captured_gradients is read only"):
        tape.captured_gradients = {}
