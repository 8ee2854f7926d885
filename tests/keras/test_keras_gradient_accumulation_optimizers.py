"""`keras.ipu.optimizers.GradientAccumulationOptimizer` and `ALSGradientAccumulationOptimizer`,
used as graphcore/keras als_optimizer_test.py does (one apply per loop iteration), against
SGD applied by hand to the summed mini-batch gradients."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.keras.ipu.optimizers import (
    ALSGradientAccumulationOptimizer,
    ALSOptimizer,
    ALSOptimizerSGD,
    GradientAccumulationOptimizer,
)
from tensorflow.python import ipu

RNG = np.random.default_rng(3)
BATCHES = RNG.normal(size=(4, 2, 3)).astype(np.float32)  # four mini-batches of two samples
TARGETS = RNG.normal(size=(4, 2, 1)).astype(np.float32)
W0 = RNG.normal(size=(3, 1)).astype(np.float32)
LR = 0.1


def _gradient(w, x, t):
    return x.T @ (2.0 * (x @ w - t) / t.size)


def _expected(mini_batches: int, mean: bool = False) -> np.ndarray:
    w = W0.astype(np.float64)
    for start in range(0, len(BATCHES), mini_batches):
        group = range(start, start + mini_batches)
        total = sum(_gradient(w, BATCHES[i], TARGETS[i]) for i in group)
        w = w - LR * (total / mini_batches if mean else total)
    return w


def _train(strategy, opt, mini_batches: int) -> np.ndarray:
    with strategy.scope():
        w = tf.Variable(W0)

        def body(i):
            x, t = tf.gather(BATCHES, i), tf.gather(TARGETS, i)
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - t))
            (gradient,) = opt.get_gradients(loss, [w])
            opt.apply_gradients([(gradient, w)])
            return i + 1

        @tf.function(jit_compile=True)
        def program(start):
            return ipu.loops.repeat(mini_batches, body, [start])

        for start in range(0, len(BATCHES), mini_batches):
            strategy.run(program, args=(tf.constant(start),))
    return w.numpy()


@pytest.mark.parametrize("reduction", ["SUM", "MEAN"])
def test_accumulated_gradients_are_applied_once_per_group(strategy_on, reduction):
    opt = GradientAccumulationOptimizer(
        keras.optimizers.legacy.SGD(LR), 2, reduction_method=reduction
    )
    ours = _train(strategy_on(1), opt, 2)
    np.testing.assert_allclose(ours, _expected(2, mean=reduction == "MEAN"), rtol=1e-5)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ALSOptimizer(keras.optimizers.legacy.SGD(LR), initial_loss_scaling_factor=8),
        lambda: ALSOptimizerSGD(LR, initial_loss_scaling_factor=8),
    ],
    ids=["ALSOptimizer", "ALSOptimizerSGD"],
)
def test_als_with_accumulation(strategy_on, build):
    opt = ALSGradientAccumulationOptimizer(build(), 2)
    ours = _train(strategy_on(1), opt, 2)
    # Four mini-batches, two weight updates (the factor's update period counts weight updates):
    # the factor update is not due yet, so unscaling is exact.
    assert float(opt.loss_scaling_factor) == 8.0 and int(opt.update_counter) == 2
    np.testing.assert_allclose(ours, _expected(2), rtol=1e-5)


def test_one_mini_batch_gives_back_the_optimizer():
    sgd = keras.optimizers.legacy.SGD(LR)
    assert GradientAccumulationOptimizer(sgd, 1) is sgd


def test_checks_and_config():
    with pytest.raises(ValueError, match="num_mini_batches must be >= 1"):
        GradientAccumulationOptimizer(keras.optimizers.legacy.SGD(LR), 0)
    with pytest.raises(ValueError, match="can only be used with instances of ALSOptimizer"):
        ALSGradientAccumulationOptimizer(keras.optimizers.legacy.SGD(LR), 2)
    opt = GradientAccumulationOptimizer(keras.optimizers.legacy.Adam(0.5), 4)
    rebuilt = GradientAccumulationOptimizer.from_config(opt.get_config())
    assert rebuilt.get_config()["num_mini_batches"] == 4
    np.testing.assert_allclose(float(rebuilt.learning_rate), 0.5)
