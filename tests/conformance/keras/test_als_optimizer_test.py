"""Conformance: graphcore/keras `keras/ipu/optimizers/als_optimizer_test.py`.

`keras.ipu.optimizers.ALSOptimizer` (automatic loss scaling): its hyperparameters are
checked with the original's errors and its statistics are read-only; training a float16
dense layer under it lowers the loss; gradients overflowing the histogram's bin edge halve
(divide by the increase factor) the loss scaling factor after `update_frequency` steps,
small ones multiply it, and each update resets the histogram; the factor stays within
[1, max_loss_scaling_factor). Each training scenario runs in a custom step
(GradientCaptureTape, `loops.repeat`, with and without ALSGradientAccumulationOptimizer)
and in Keras `fit`, with the dense layer bare or wrapped in a gradient capture layer.

The original's cases are the product of 2 optimizers, 4 ALS settings, 3 wrappers and 2
accumulation counts; a few of its combinations are run here, each setting, wrapper and
count at least once. With gradient accumulation the factor's update period counts weight
updates (executions of the accumulated mini-batches), as the original's checks say.

The saturation scenarios' "huge" targets (10x float16's maximum) make float16 gradients
that saturate at float16's maximum, as on the IPU (the emulated IPUs saturate half-precision
overflows, in optimizer updates too: engine/half_precision_updates.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python.ipu import loops
from tensorflow.python.ipu.eager import backprop as ipu_backprop
from tf_keras.ipu.layers import CaptureActivationGradients, CaptureUpstreamGradients
from tf_keras.ipu.optimizers import ALSGradientAccumulationOptimizer, ALSOptimizer

BATCH_SIZE = 64
NUM_BATCHES = 4
DATA = np.ones((NUM_BATCHES * BATCH_SIZE, 4), np.float32)
TARGETS = 2 * np.ones((NUM_BATCHES * BATCH_SIZE, 128), np.float32)
TARGETS_HUGE = TARGETS * np.finfo(np.float16).max * 10
BIN_EDGE = float(np.finfo(np.float16).max - 2 * np.finfo(np.float16).eps)

ALS_SETTINGS = [
    {"initial_loss_scaling_factor": 8, "update_frequency": 2, "increase_factor": 2},
    {"initial_loss_scaling_factor": 16, "update_frequency": 2, "increase_factor": 4},
    {"initial_loss_scaling_factor": 32, "update_frequency": 2, "increase_factor": 8},
    {"initial_loss_scaling_factor": 32, "update_frequency": 2, "increase_factor": 16},
]
OPTIMIZERS = {"Adam": keras.optimizers.legacy.Adam, "GradientDescent": keras.optimizers.legacy.SGD}
WRAPPERS = {
    "no_wrapper": None,
    "CaptureUpstreamGradients": CaptureUpstreamGradients,
    "CaptureActivationGradients": CaptureActivationGradients,
}
# (optimizer, ALS setting, wrapper, gradient accumulation steps per replica)
CASES = [
    ("Adam", 0, "no_wrapper", 1),
    ("GradientDescent", 1, "CaptureUpstreamGradients", 1),
    ("Adam", 2, "CaptureActivationGradients", 2),
    ("GradientDescent", 3, "no_wrapper", 2),
]
CASE_IDS = [f"{o}_{s}_{w}_GA{g}" for o, s, w, g in CASES]


def _dense(dtype, wrapper=None, init=1.0):
    layer = keras.layers.Dense(
        TARGETS.shape[1],
        activation="relu",
        dtype=dtype,
        kernel_initializer=keras.initializers.Constant(init),
    )
    return wrapper(layer) if wrapper else layer


def _optimizer(case, **als_extra):
    """The case's ALS optimizer (in an accumulation wrapper with more than one step) and
    whether it counts the captured gradients only (with CaptureUpstreamGradients the
    layer's gradients would otherwise be counted twice, as the original says)."""
    optimizer, setting, wrapper, ga_steps = case
    captured_only = WRAPPERS[wrapper] is CaptureUpstreamGradients
    als = ALSOptimizer(
        OPTIMIZERS[optimizer](0.01),
        **ALS_SETTINGS[setting],
        histogram_bin_edge=BIN_EDGE,
        captured_grads_only=captured_only,
        **als_extra,
    )
    if ga_steps > 1:
        return ALSGradientAccumulationOptimizer(als, ga_steps), als
    return als, als


def _loop(opt, layers, ga_steps):
    """The original's custom training loop: `ga_steps` steps in one execution."""

    def step(x, t, _):
        with ipu_backprop.GradientCaptureTape() as tape:
            y = x
            for layer in layers:
                y = layer(y)
            loss = tf.compat.v1.losses.mean_squared_error(labels=t, predictions=y)
        variables = [v for layer in layers for v in layer.trainable_variables]
        gradients = opt.get_gradients(loss, variables)
        opt.apply_gradients(
            list(zip(gradients, variables, strict=True)), captured_grads=tape.captured_gradients
        )
        return x, t, loss

    @tf.function(jit_compile=True)
    @tf.function  # the original's loop_fn is a tf.function: IPUStrategy.run refuses Python
    def loop(x, t):
        return loops.repeat(ga_steps, step, inputs=[x, t, 0.0])[2]

    return loop


def _check_decreasing(losses):
    assert np.all(np.isfinite(losses)), losses
    assert np.all(np.diff(losses) < 0), losses


def _check_lsf_update(strategy, run, als, overflowing: bool, accumulating: bool = True):
    """Runs `update_frequency` executions (the factor unchanged, the histogram dominated by
    the expected bin, or empty when the statistics are not accumulated), then one more: the
    factor is divided or multiplied by the increase factor and the histogram is reset."""
    initial = als.initial_loss_scaling_factor
    for _ in range(als.update_frequency):
        assert np.isfinite(run())
        hist = strategy.run(tf.function(lambda: als.histogram)).numpy()
        if not accumulating:
            np.testing.assert_array_equal(hist, [0.0, 0.0])
        elif overflowing:
            assert hist[1] > hist[0], hist
        else:
            assert hist[0] > hist[1], hist
        assert float(strategy.run(tf.function(lambda: als.loss_scaling_factor))) == initial
    run()
    factor = als.decrease_factor if overflowing else als.increase_factor
    assert float(strategy.run(tf.function(lambda: als.loss_scaling_factor))) == initial * factor
    np.testing.assert_array_equal(strategy.run(tf.function(lambda: als.histogram)), [0.0, 0.0])


#: Why the saturation scenarios fail here: the original's overflowing gradients stay finite on
#: the IPU (float16 results saturate at float16's maximum); the emulated IPUs compute IEEE
#: float16, whose overflow is an infinity.
SATURATION = (
    "float16 overflow is an infinity on the emulated IPUs (the IPU saturates at float16's "
    "maximum): the weights updated with infinite gradients make the next loss non-finite"
)


# Hyperparameter checks -------------------------------------------------------------------------


def _sgd():
    return keras.optimizers.legacy.SGD(0.1)


@pytest.mark.follows("testInvalidInitialLSF")
def test_invalid_initial_lsf():
    with pytest.raises(ValueError, match="initial_loss_scaling_factor must be a power of two"):
        ALSOptimizer(_sgd(), initial_loss_scaling_factor=5)


@pytest.mark.follows("testInvalidUpdateFrequency")
def test_invalid_update_frequency():
    with pytest.raises(ValueError, match="update_frequency must be nonzero and positive"):
        ALSOptimizer(_sgd(), update_frequency=0)


@pytest.mark.follows("testInvalidIncreaseFactor")
def test_invalid_increase_factor():
    with pytest.raises(ValueError, match="increase_factor must be a power of two"):
        ALSOptimizer(_sgd(), increase_factor=3)


@pytest.mark.follows("testCannotSetHistogram")
def test_cannot_set_histogram():
    opt = ALSOptimizer(_sgd())
    with pytest.raises(ValueError, match="histogram is a read only property."):
        opt.histogram = None


@pytest.mark.follows("testCannotSetNormalizedHistogram")
def test_cannot_set_normalized_histogram():
    opt = ALSOptimizer(_sgd())
    with pytest.raises(ValueError, match="normalized_histogram is a read only property."):
        opt.normalized_histogram = None


@pytest.mark.follows("testCannotSetLSF")
def test_cannot_set_lsf():
    opt = ALSOptimizer(_sgd())
    with pytest.raises(ValueError, match="loss_scaling_factor is a read only property."):
        opt.loss_scaling_factor = 1


@pytest.mark.follows("testCannotSetDecreaseFactor")
def test_cannot_set_decrease_factor():
    opt = ALSOptimizer(_sgd())
    with pytest.raises(ValueError, match="decrease_factor is a read only property."):
        opt.decrease_factor = 2
    assert opt.decrease_factor == 1 / opt.increase_factor


@pytest.mark.follows("testInvalidMaxLSF")
def test_invalid_max_lsf():
    with pytest.raises(ValueError, match="max_loss_scaling_factor must be a power of two"):
        ALSOptimizer(_sgd(), max_loss_scaling_factor=5)


@pytest.mark.follows("testRatioThresholdTooLow")
def test_ratio_threshold_too_low():
    with pytest.raises(ValueError, match="ratio_threshold must be greater than zero and less"):
        ALSOptimizer(_sgd(), ratio_threshold=-1)


@pytest.mark.follows("testRatioThresholdTooHigh")
def test_ratio_threshold_too_high():
    with pytest.raises(ValueError, match="ratio_threshold must be greater than zero and less"):
        ALSOptimizer(_sgd(), ratio_threshold=2)


@pytest.mark.follows("testInitialLSFTooHigh")
def test_initial_lsf_too_high():
    with pytest.raises(
        ValueError, match="initial_loss_scaling_factor must be less than max_loss_scaling_factor"
    ):
        ALSOptimizer(_sgd(), initial_loss_scaling_factor=4, max_loss_scaling_factor=2)


@pytest.mark.follows("testInitialLSFAndIncreaseFactorTooHigh")
def test_initial_lsf_and_increase_factor_too_high():
    with pytest.raises(
        ValueError,
        match="initial_loss_scaling_factor x increase_factor must be less than "
        "max_loss_scaling_factor",
    ):
        ALSOptimizer(
            _sgd(), initial_loss_scaling_factor=1, increase_factor=4, max_loss_scaling_factor=4
        )


# Custom training loops -------------------------------------------------------------------------


@pytest.mark.follows("testSimpleTraining")
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_simple_training(strategy_on, case):
    strategy = strategy_on(1)
    ga_steps = case[3]
    with strategy.scope():
        opt, _ = _optimizer(case)
        dense = _dense(tf.float16, WRAPPERS[case[2]])
        loop = _loop(opt, [dense], ga_steps)
        losses = [float(strategy.run(loop, args=[DATA, TARGETS])) for _ in range(3)]
    _check_decreasing(losses)


@pytest.mark.follows("testDistributionWithSaturation")
@pytest.mark.parametrize("case", CASES[:1], ids=CASE_IDS[:1])
def test_distribution_with_saturation(strategy_on, case):
    strategy = strategy_on(1)
    with strategy.scope():
        opt, als = _optimizer(case)
        # Only the float16 layer's gradients are counted in the histogram.
        layers = [_dense(tf.float16, WRAPPERS[case[2]]), _dense(tf.float32)]
        loop = _loop(opt, layers, case[3])
        run = lambda: strategy.run(loop, args=[DATA, TARGETS_HUGE])  # noqa: E731
        _check_lsf_update(strategy, run, als, overflowing=True)


@pytest.mark.follows("testDistributionWithoutSaturation")
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_distribution_without_saturation(strategy_on, case):
    strategy = strategy_on(1)
    with strategy.scope():
        opt, als = _optimizer(case)
        layers = [_dense(tf.float16, WRAPPERS[case[2]]), _dense(tf.float32)]
        loop = _loop(opt, layers, case[3])
        run = lambda: strategy.run(loop, args=[DATA, TARGETS])  # noqa: E731
        _check_lsf_update(strategy, run, als, overflowing=False)


# The original skips the CaptureUpstreamGradients case here (captured gradients alone are
# per example, not summed over the batch, and do not overflow).
NO_CAPTURE_ONLY = [case for case in CASES if case[2] != "CaptureUpstreamGradients"][:1]


@pytest.mark.follows("testDistributionWithSaturationNoStatAccum")
@pytest.mark.parametrize("case", NO_CAPTURE_ONLY, ids=lambda c: f"{c[0]}_{c[1]}_{c[2]}_GA{c[3]}")
def test_distribution_with_saturation_no_stat_accum(strategy_on, case):
    strategy = strategy_on(1)
    with strategy.scope():
        opt, als = _optimizer(case, accumulate_statistics_over_update_period=False)
        loop = _loop(opt, [_dense(tf.float16, WRAPPERS[case[2]])], case[3])
        run = lambda: strategy.run(loop, args=[DATA, TARGETS_HUGE])  # noqa: E731
        _check_lsf_update(strategy, run, als, overflowing=True, accumulating=False)


@pytest.mark.follows("testDistributionWithoutSaturationNoStatAccum")
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_distribution_without_saturation_no_stat_accum(strategy_on, case):
    strategy = strategy_on(1)
    with strategy.scope():
        opt, als = _optimizer(case, accumulate_statistics_over_update_period=False)
        loop = _loop(opt, [_dense(tf.float16, WRAPPERS[case[2]])], case[3])
        run = lambda: strategy.run(loop, args=[DATA, TARGETS])  # noqa: E731
        _check_lsf_update(strategy, run, als, overflowing=False, accumulating=False)


# Keras fit ---------------------------------------------------------------------------------------


def _keras_model(case, opt, two_layers: bool):
    inputs = keras.layers.Input(shape=DATA.shape[1])
    x = _dense(tf.float16, WRAPPERS[case[2]])(inputs)
    if two_layers:
        x = _dense(tf.float32)(x)
    model = keras.Model(inputs, x)
    model.compile(optimizer=opt, loss="mse", steps_per_execution=case[3])
    model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=case[3])
    return model


def _fit(model, case, targets, epochs=1):
    history = model.fit(
        DATA,
        targets,
        epochs=epochs,
        batch_size=BATCH_SIZE,
        steps_per_epoch=case[3],
        verbose=False,
    )
    return history.history["loss"]


@pytest.mark.follows("testSimpleTrainingKeras")
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_simple_training_keras(strategy_on, case):
    strategy = strategy_on(1)
    with strategy.scope():
        als, _ = _optimizer(case[:3] + (1,))
        model = _keras_model(case, als, two_layers=False)
        losses = _fit(model, case, TARGETS, epochs=3)
    _check_decreasing(losses)


@pytest.mark.follows("testDistributionWithSaturationKeras")
@pytest.mark.parametrize("case", CASES[:1], ids=CASE_IDS[:1])
def test_distribution_with_saturation_keras(strategy_on, case):
    strategy = strategy_on(1)
    with strategy.scope():
        als, _ = _optimizer(case[:3] + (1,))
        model = _keras_model(case, als, two_layers=True)
        run = lambda: _fit(model, case, TARGETS_HUGE)[0]  # noqa: E731
        _check_lsf_update(strategy, run, als, overflowing=True)


@pytest.mark.follows("testDistributionWithoutSaturationKeras")
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_distribution_without_saturation_keras(strategy_on, case):
    strategy = strategy_on(1)
    with strategy.scope():
        als, _ = _optimizer(case[:3] + (1,))
        model = _keras_model(case, als, two_layers=True)
        run = lambda: _fit(model, case, TARGETS)[0]  # noqa: E731
        _check_lsf_update(strategy, run, als, overflowing=False)


# The factor's bounds -----------------------------------------------------------------------------


def _lsf_after_each_step(strategy, opt, v_init, steps):
    """The factor after each of `steps` minimisations of MSE(3v, 1), v reset each time."""
    v = tf.Variable(v_init, dtype=tf.float16, shape=())

    @tf.function(jit_compile=True)
    def train():
        with tf.GradientTape() as tape:
            loss = tf.compat.v1.losses.mean_squared_error(labels=tf.ones_like(v), predictions=3 * v)
        opt.minimize(loss, [v], tape=tape)
        return loss

    factors = []
    for _ in range(steps):
        strategy.run(train)
        factors.append(float(strategy.run(tf.function(lambda: opt.loss_scaling_factor))))
        v.assign(v_init)
    return factors


@pytest.mark.follows("testUpperLSFCap")
def test_upper_lsf_cap(strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        opt = ALSOptimizer(
            keras.optimizers.legacy.SGD(0.01),
            increase_factor=2,
            initial_loss_scaling_factor=1,
            max_loss_scaling_factor=16,
            update_frequency=1,
        )
        # A factor reaching the maximum is not taken.
        assert _lsf_after_each_step(strategy, opt, 1.0, 4) == [2, 4, 8, 8]


@pytest.mark.follows("testLowerLSFCap")
def test_lower_lsf_cap(strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        opt = ALSOptimizer(
            keras.optimizers.legacy.SGD(0.01),
            increase_factor=2,
            initial_loss_scaling_factor=16,
            update_frequency=1,
        )
        # float16's maximum: every gradient overflows; the factor stops at 1.
        v_init = float(np.finfo(np.float16).max)
        assert _lsf_after_each_step(strategy, opt, v_init, 5) == [8, 4, 2, 1, 1]
