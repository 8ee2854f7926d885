"""`keras.ipu.optimizers.ALSOptimizer`, as graphcore/keras als_optimizer_test.py uses it: the
loss scaling factor follows the histogram of float16 gradients, and the wrapped optimizer
applies the unscaled gradients (checked against the stock optimizer)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.keras.ipu.layers import CaptureUpstreamGradients
from tensorflow.keras.ipu.optimizers import ALSOptimizer

DATA = np.ones((8, 4), np.float32)
TARGETS = 2 * np.ones((8, 16), np.float32)
# Targets whose scaled float16 gradients reach the bin edge (2**13) without overflowing float16
# (in the model below, about 2x and 8x the targets, with a loss scaling factor of 16).
TARGETS_LARGE = 6000 * np.ones((8, 16), np.float32)


def _dense(dtype, init=1.0):
    return keras.layers.Dense(
        16, activation="relu", dtype=dtype, kernel_initializer=keras.initializers.Constant(init)
    )


def _als(learning_rate, update_frequency=2, **kwargs):
    """ALS around legacy SGD, as the original's tests use it."""
    return ALSOptimizer(
        keras.optimizers.legacy.SGD(learning_rate), update_frequency=update_frequency, **kwargs
    )


def _step_function(opt, layers):
    @tf.function(jit_compile=True)
    def step(x, t):
        y = x
        for layer in layers:
            y = layer(y)
        loss = tf.reduce_mean(keras.losses.mean_squared_error(t, tf.cast(y, tf.float32)))
        variables = [v for layer in layers for v in layer.trainable_variables]
        gradients = opt.get_gradients(loss, variables)
        opt.apply_gradients(list(zip(gradients, variables, strict=True)))
        return loss

    return step


@pytest.mark.parametrize("increase_factor", [2, 4])
def test_overflowing_gradients_decrease_the_factor(strategy_on, increase_factor):
    strategy = strategy_on(1)
    with strategy.scope():
        opt = _als(1e-9, initial_loss_scaling_factor=16, increase_factor=increase_factor)
        step = _step_function(opt, [_dense(tf.float32), _dense(tf.float16)])
        for _ in range(opt.update_frequency):
            assert np.isfinite(strategy.run(step, args=(DATA, TARGETS_LARGE)))
            hist = opt.histogram.numpy()
            assert hist[1] > hist[0]  # only the float16 layer's gradients are counted
            assert float(opt.loss_scaling_factor) == opt.initial_loss_scaling_factor
        strategy.run(step, args=(DATA, TARGETS_LARGE))
    assert float(opt.loss_scaling_factor) == 16 / increase_factor
    assert float(opt.previous_loss_scaling_factor) == 16
    np.testing.assert_array_equal(opt.histogram, [0.0, 0.0])
    assert int(opt.update_counter) == 0


def test_small_gradients_increase_the_factor_up_to_the_maximum(strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        opt = _als(
            1e-6, initial_loss_scaling_factor=2, update_frequency=1, max_loss_scaling_factor=16
        )
        step = _step_function(opt, [_dense(tf.float16, init=0.01)])
        factors = []
        for _ in range(5):
            strategy.run(step, args=(DATA, TARGETS))
            factors.append(float(opt.loss_scaling_factor))
    # An update due every step; a factor reaching the maximum is not taken.
    assert factors == [4.0, 8.0, 8.0, 8.0, 8.0]


def test_the_wrapped_optimizer_applies_the_unscaled_gradients(strategy_on):
    strategy = strategy_on(1)
    x = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    with strategy.scope():
        layer = _dense(tf.float32, init=0.1)
        opt = ALSOptimizer(keras.optimizers.legacy.SGD(0.05), initial_loss_scaling_factor=64)
        step = _step_function(opt, [layer])
        for _ in range(3):
            strategy.run(step, args=(x, TARGETS))
    reference = _dense(tf.float32, init=0.1)
    sgd = keras.optimizers.legacy.SGD(0.05)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.mean_squared_error(TARGETS, reference(x)))
        variables = reference.trainable_variables
        sgd.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
    for ours, theirs in zip(layer.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def _fit(strategy, optimizer, build_kwargs=None, **compile_kwargs):
    with strategy.scope():
        keras.utils.set_random_seed(2)
        inputs = keras.Input((4,))
        outputs = keras.layers.Dense(16, activation="relu", **(build_kwargs or {}))(inputs)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer, "mse", **compile_kwargs)
        history = model.fit(DATA, TARGETS, batch_size=2, shuffle=False, verbose=0)
    return model, history


def test_keras_fit_with_als_matches_the_plain_optimizer(strategy_on):
    strategy = strategy_on(1)
    opt = ALSOptimizer(
        keras.optimizers.SGD(0.01), initial_loss_scaling_factor=4, update_frequency=2
    )
    model, history = _fit(strategy, opt, steps_per_execution=4)
    reference, expected = _fit(strategy, keras.optimizers.SGD(0.01), steps_per_execution=4)
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"], rtol=1e-6)
    # No float16 gradient: no overflow seen, so the factor doubled at the update due (step 3).
    assert float(opt.loss_scaling_factor) == 8.0
    assert opt.lr is opt.learning_rate  # the wrapped optimizer's hyperparameters


def test_keras_fit_counts_only_captured_gradients_when_asked(strategy_on):
    strategy = strategy_on(1)
    opt = ALSOptimizer(
        keras.optimizers.SGD(1e-9),
        initial_loss_scaling_factor=1,
        update_frequency=100,
        captured_grads_only=True,
    )
    with strategy.scope():
        inputs = keras.Input((4,))
        hidden = CaptureUpstreamGradients(
            keras.layers.Dense(16, dtype="float16", kernel_initializer="ones"), tag="h"
        )(inputs)
        outputs = keras.layers.Dense(16, dtype="float16", kernel_initializer="ones")(hidden)
        model = keras.Model(inputs, outputs)
        model.compile(opt, "mse", steps_per_execution=4)
        model.fit(DATA, TARGETS, batch_size=2, shuffle=False, verbose=0)
    # The captured gradient of each step: a [2, 16] float16 tensor, all below the bin edge.
    np.testing.assert_array_equal(opt.histogram, [4 * 2 * 16, 0])
    np.testing.assert_array_equal(opt.normalized_histogram, [1.0, 0.0])


def test_normalized_histogram_of_an_empty_histogram_is_zero():
    opt = ALSOptimizer(keras.optimizers.legacy.SGD(0.01))
    np.testing.assert_array_equal(opt.normalized_histogram, [0.0, 0.0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"initial_loss_scaling_factor": 3}, "initial_loss_scaling_factor must be a power of two"),
        ({"update_frequency": 0}, "update_frequency must be nonzero and positive"),
        ({"increase_factor": 3}, "increase_factor must be a power of two"),
        ({"max_loss_scaling_factor": 100}, "max_loss_scaling_factor must be a power of two"),
        ({"ratio_threshold": 0.0}, "ratio_threshold must be greater than zero and less than one"),
        ({"ratio_threshold": 1.0}, "ratio_threshold must be greater than zero and less than one"),
        (
            {"initial_loss_scaling_factor": 8, "max_loss_scaling_factor": 8},
            "initial_loss_scaling_factor must be less than max_loss_scaling_factor",
        ),
        (
            {"initial_loss_scaling_factor": 1, "increase_factor": 4, "max_loss_scaling_factor": 4},
            "initial_loss_scaling_factor x increase_factor must be less than",
        ),
    ],
)
def test_invalid_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ALSOptimizer(keras.optimizers.legacy.SGD(0.01), **kwargs)


@pytest.mark.parametrize(
    "name",
    ["histogram", "normalized_histogram", "loss_scaling_factor", "decrease_factor"],
)
def test_state_is_read_only(name):
    opt = ALSOptimizer(keras.optimizers.legacy.SGD(0.01))
    with pytest.raises(ValueError, match=f"{name} is a read only property"):
        setattr(opt, name, 1.0)


def test_config_round_trip():
    opt = ALSOptimizer(
        keras.optimizers.legacy.Adam(0.003), initial_loss_scaling_factor=4, update_frequency=3
    )
    rebuilt = ALSOptimizer.from_config(opt.get_config())
    assert isinstance(rebuilt._opt, keras.optimizers.legacy.Adam)
    assert rebuilt.update_frequency == 3 and rebuilt.initial_loss_scaling_factor == 4
    np.testing.assert_allclose(float(rebuilt.learning_rate), 0.003)
    assert rebuilt.decrease_factor == 0.5 and rebuilt.supports_captured_grads
