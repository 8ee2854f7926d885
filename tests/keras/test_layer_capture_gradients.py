"""`keras.ipu.layers.CaptureUpstreamGradients` / `CaptureActivationGradients` in Keras fit on
the IPU, as graphcore/keras capture_upstream_gradients_test.py uses them: the optimizer receives
the captured gradients, checked against tf.GradientTape on a stock Keras model."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.keras.ipu.layers import CaptureActivationGradients, CaptureUpstreamGradients
from tensorflow.python.ipu import ipu_outfeed_queue
from tensorflow.python.ipu.eager.backprop import GradientCaptureTape


class SGDCaptureOptimizer(keras.optimizers.SGD):
    def __init__(self, learning_rate, captured_grad_outfeed=None):
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
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 4)).astype(np.float32), 2.0 * np.ones((n, 4), np.float32)


def _dense(activation=None):
    return keras.layers.Dense(4, activation=activation, kernel_initializer="ones", name="dense")


def _upstream_model():
    inputs = keras.Input((4,))
    x = CaptureUpstreamGradients(_dense())(inputs)
    return keras.Model(inputs, keras.layers.Activation("relu")(x))


def _activation_model():
    inputs = keras.Input((4,))
    return keras.Model(inputs, CaptureActivationGradients(_dense("relu"))(inputs))


def _expected_pre_activation_gradient(x, t):
    """dL/dy for y = dense(x), L = MSE(relu(y), t), by tf.GradientTape."""
    y = tf.constant(x @ np.ones((4, 4), np.float32))
    with tf.GradientTape() as tape:
        tape.watch(y)
        loss = keras.losses.MeanSquaredError()(t, tf.nn.relu(y))
    return tape.gradient(loss, y).numpy()


@pytest.mark.parametrize(
    "build, tag",
    [(_upstream_model, "dense_cug"), (_activation_model, "dense_cag_activation")],
    ids=["upstream", "activation"],
)
def test_captured_gradients_reach_the_optimizer(strategy_on, build, tag):
    strategy = strategy_on(1)
    x, t = _data()
    with strategy.scope():
        outfeed = ipu_outfeed_queue.IPUOutfeedQueue()
        model = build()
        model.compile(SGDCaptureOptimizer(0.01, outfeed), "mse")
        history = model.fit(
            x, t, batch_size=4, steps_per_epoch=1, epochs=1, shuffle=False, verbose=0
        )
        captured = outfeed.dequeue()
    assert list(captured) == [tag]
    (gradient,) = captured[tag]
    np.testing.assert_allclose(
        np.reshape(gradient, (4, 4)), _expected_pre_activation_gradient(x[:4], t[:4]), rtol=1e-5
    )
    # Capturing changes nothing else: the loss is that of the model without capture layers.
    reference = keras.Sequential([keras.Input((4,)), _dense("relu")])
    reference.compile(keras.optimizers.SGD(0.01), "mse")
    expected = reference.fit(
        x, t, batch_size=4, steps_per_epoch=1, epochs=1, shuffle=False, verbose=0
    )
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"], rtol=1e-5)


def test_an_optimizer_without_captured_grads_trains_as_usual(strategy_on):
    strategy = strategy_on(1)
    x, t = _data()
    with strategy.scope():
        model = _upstream_model()
        model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=4)
        model.fit(x, t, batch_size=4, shuffle=False, verbose=0)
    reference = keras.Sequential([keras.Input((4,)), _dense("relu")])
    reference.compile(keras.optimizers.SGD(0.01), "mse")
    reference.fit(x, t, batch_size=4, shuffle=False, verbose=0)
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def test_capture_layers_in_a_custom_loop_with_a_capture_tape():
    layer = CaptureActivationGradients(_dense("relu"), tag="act")
    x, t = _data(4)
    with GradientCaptureTape() as tape:
        loss = keras.losses.MeanSquaredError()(t, layer(x))
    tape.gradient(loss, layer.trainable_variables)
    (gradient,) = tape.captured_gradients["act_activation"]
    np.testing.assert_allclose(gradient, _expected_pre_activation_gradient(x, t), rtol=1e-5)


def test_wrapped_layers_own_the_weights_and_round_trip_through_config():
    layer = CaptureUpstreamGradients(_dense(), tag="t")
    layer.build((None, 4))
    assert layer.trainable_weights == layer.layer.trainable_weights
    rebuilt = CaptureUpstreamGradients.from_config(layer.get_config())
    assert rebuilt.tag == "t" and isinstance(rebuilt.layer, keras.layers.Dense)
    activation = CaptureActivationGradients(_dense("tanh"))
    config = activation.get_config()
    assert config["wrapped_layer_config"]["activation"] == "tanh"
    assert CaptureActivationGradients.from_config(config).tag == activation.tag


def test_a_layer_without_activation_cannot_capture_activation_gradients():
    assert not CaptureActivationGradients.layer_is_supported(keras.layers.Flatten())
    with pytest.raises(ValueError, match="does not use an activation function"):
        CaptureActivationGradients(keras.layers.Flatten())
    with pytest.raises(ValueError, match="Expected an instance of"):
        CaptureUpstreamGradients(lambda x: x, tag="not a layer")
