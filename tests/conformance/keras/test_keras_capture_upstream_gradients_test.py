"""Conformance: graphcore/keras `keras/ipu/layers/capture_upstream_gradients_test.py`.

A model whose dense layer is wrapped in `CaptureUpstreamGradients` (followed by a ReLU)
or in `CaptureActivationGradients` (its ReLU captured) hands, when trained with `fit`, the
gradients flowing into the captured tensor to an optimizer that takes `captured_grads`
(one entry per capture layer; for a pipelined model with
`gradient_accumulation_for_captured_grads`, the sum over the accumulated mini-batches),
and trains as the same model without capture layers. The references are the gradients
of the stock Keras model's loss, taken with tf.GradientTape.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python.ipu import ipu_outfeed_queue
from tf_keras.ipu.layers import CaptureActivationGradients, CaptureUpstreamGradients


class SGDCaptureOptimizer(keras.optimizers.legacy.SGD):
    """SGD that sends the first captured gradients it is given to an outfeed."""

    def __init__(self, learning_rate, captured_grad_outfeed):
        super().__init__(learning_rate=learning_rate)
        self.captured_grad_outfeed = captured_grad_outfeed

    def apply_gradients(self, grads_and_vars, captured_grads=None):
        if captured_grads and not self.captured_grad_outfeed.enqueued:
            self.captured_grad_outfeed.enqueue(captured_grads)
        return super().apply_gradients(grads_and_vars)

    @property
    def supports_captured_grads(self):
        return True


def _data(n=16):
    return np.ones((n, 4), np.float32), 2.0 * np.ones((n, 4), np.float32)


def _dense(capture, with_capture, x):
    """A 4-unit dense layer (kernel of ones) and its ReLU, captured as the case says."""
    init = keras.initializers.Constant(1.0)
    if with_capture and capture is CaptureActivationGradients:
        return capture(keras.layers.Dense(4, activation="relu", kernel_initializer=init))(x)
    dense = keras.layers.Dense(4, kernel_initializer=init)
    if with_capture:
        dense = capture(dense)
    return keras.layers.Activation("relu")(dense(x))


def _model(capture, with_capture=True, stages=1):
    inputs = keras.layers.Input(shape=(4,))
    x = inputs
    for stage in range(stages):
        if stages > 1:
            with keras.ipu.PipelineStage(stage):
                x = _dense(capture, with_capture, x)
        else:
            x = _dense(capture, with_capture, x)
    return keras.Model(inputs, x)


def _tags(model):
    """The captured gradients' tags, from the input's side."""
    suffix = {CaptureUpstreamGradients: "", CaptureActivationGradients: "_activation"}
    return [
        layer.tag + suffix[type(layer)]
        for layer in model.layers
        if isinstance(layer, (CaptureUpstreamGradients, CaptureActivationGradients))
    ]


def _pre_activation_gradients(x, t, stages):
    """dL/dy of each dense layer's output y (before its ReLU), from the input's side, for
    the stock Keras model of `stages` dense+ReLU layers (kernels of ones), MSE loss."""
    layers = [keras.layers.Dense(4, kernel_initializer="ones") for _ in range(stages)]
    pre_activations = []
    with tf.GradientTape() as tape:
        a = tf.constant(x)
        for layer in layers:
            y = layer(a)
            tape.watch(y)
            pre_activations.append(y)
            a = tf.nn.relu(y)
        loss = tf.reduce_mean(tf.square(a - t))  # Keras' MSE of equal-length rows
    return [g.numpy() for g in tape.gradient(loss, pre_activations)]


CAPTURES = [CaptureUpstreamGradients, CaptureActivationGradients]


@pytest.mark.follows("testExplicitWrapping")
@pytest.mark.parametrize("capture", CAPTURES, ids=lambda c: c.__name__)
def test_explicit_wrapping(strategy_on, capture):
    strategy = strategy_on(1)
    x, t = _data()
    with strategy.scope():
        outfeed = ipu_outfeed_queue.IPUOutfeedQueue()
        model = _model(capture)
        model.compile(SGDCaptureOptimizer(0.01, outfeed), "mse")
        history = model.fit(x, t, batch_size=4, steps_per_epoch=1, epochs=1, verbose=0)
        captured = outfeed.dequeue()
        assert list(captured) == _tags(model)
        (expected,) = _pre_activation_gradients(x[:4], t[:4], stages=1)
        np.testing.assert_allclose(np.reshape(list(captured.values())[0], (4, 4)), expected)

        plain = _model(capture, with_capture=False)
        plain.compile("sgd", "mse")
        history_plain = plain.fit(x, t, batch_size=4, steps_per_epoch=1, epochs=1, verbose=0)
    np.testing.assert_array_equal(history.history["loss"], history_plain.history["loss"])


@pytest.mark.follows("testExplicitWrappingPipeline")
@pytest.mark.parametrize("capture", CAPTURES, ids=lambda c: c.__name__)
def test_explicit_wrapping_pipeline(strategy_on, capture):
    strategy = strategy_on(2)
    x, t = _data()
    with strategy.scope():
        outfeed = ipu_outfeed_queue.IPUOutfeedQueue()
        model = _model(capture, stages=2)
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=4,
            device_mapping=[0, 1],
            gradient_accumulation_for_captured_grads=True,
        )
        model.compile(SGDCaptureOptimizer(0.01, outfeed), "mse", steps_per_execution=4)
        history = model.fit(x, t, batch_size=4, epochs=1, verbose=0)
        captured = outfeed.dequeue()
        assert sorted(captured) == sorted(_tags(model))
        # Accumulated over the 4 mini-batches (all alike here): 4 times one mini-batch's.
        expected = _pre_activation_gradients(x[:4], t[:4], stages=2)
        for tag, gradient in zip(_tags(model), expected, strict=True):
            np.testing.assert_allclose(np.reshape(captured[tag], (4, 4)), 4 * gradient)

        plain = _model(capture, with_capture=False, stages=2)
        plain.set_pipelining_options(
            gradient_accumulation_steps_per_replica=4, device_mapping=[0, 1]
        )
        plain.compile("sgd", "mse", steps_per_execution=4)
        history_plain = plain.fit(x, t, batch_size=4, epochs=1, verbose=0)
    np.testing.assert_array_equal(history.history["loss"], history_plain.history["loss"])
