"""rand_ops.dropout: the definition, seeds, the device generator, gradients and XLA."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import rand_ops
from openipu._src.system import seeds

RNG = np.random.default_rng(8)
X = RNG.uniform(1, 2, size=(64, 64)).astype(np.float32)


def test_dropped_fraction_and_scaling():
    out = rand_ops.dropout(X, rate=0.3, seed=[1, 2]).numpy()
    dropped = out == 0
    assert abs(dropped.mean() - 0.3) < 0.03
    np.testing.assert_allclose(out[~dropped], X[~dropped] / 0.7, rtol=1e-6)


def test_same_seed_same_mask_and_different_seed_different_mask():
    first = rand_ops.dropout(X, rate=0.5, seed=[1, 2])
    np.testing.assert_array_equal(first, rand_ops.dropout(X, rate=0.5, seed=np.array([1, 2])))
    assert not np.array_equal(first, rand_ops.dropout(X, rate=0.5, seed=[2, 1]))


def test_seeded_dropout_under_xla_matches_eager():
    eager = rand_ops.dropout(X, rate=0.4, seed=[7, 9])
    jitted = tf.function(lambda v: rand_ops.dropout(v, rate=0.4, seed=[7, 9]), jit_compile=True)(X)
    np.testing.assert_array_equal(jitted, eager)


def test_unseeded_dropout_repeats_after_reset_ipu_seed():
    @tf.function(jit_compile=True)
    def drop(v):
        return rand_ops.dropout(v, rate=0.5)

    seeds.reset_ipu_seed(1234)
    first, second = drop(X).numpy(), drop(X).numpy()
    assert not np.array_equal(first, second)  # the generator moves on between runs
    seeds.reset_ipu_seed(1234)
    np.testing.assert_array_equal(drop(X), first)
    np.testing.assert_array_equal(drop(X), second)


def test_unseeded_eager_dropout_repeats_after_reset_ipu_seed():
    seeds.reset_ipu_seed(99)
    first = rand_ops.dropout(X, rate=0.5).numpy()
    assert not np.array_equal(first, rand_ops.dropout(X, rate=0.5))
    seeds.reset_ipu_seed(99)
    np.testing.assert_array_equal(rand_ops.dropout(X, rate=0.5), first)


def test_noise_shape_broadcasts_the_mask():
    out = rand_ops.dropout(X, rate=0.5, noise_shape=[64, 1], seed=[3, 4]).numpy()
    rows_dropped = (out == 0).all(axis=1)
    rows_kept = (out != 0).all(axis=1)
    assert np.all(rows_dropped | rows_kept) and rows_dropped.any() and rows_kept.any()
    partial = rand_ops.dropout(X, rate=0.5, noise_shape=[None, 1], seed=[3, 4])
    np.testing.assert_array_equal(partial, out)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_gradient_is_the_mask_times_the_scale(jit_compile):
    @tf.function(jit_compile=jit_compile)
    def value_and_gradient(v):
        with tf.GradientTape() as tape:
            tape.watch(v)
            out = rand_ops.dropout(v, rate=0.25, seed=[5, 6])
            total = tf.reduce_sum(out)
        return out, tape.gradient(total, v)

    out, gradient = value_and_gradient(tf.constant(X))
    np.testing.assert_allclose(gradient, np.where(out.numpy() == 0, 0.0, 1 / 0.75), rtol=1e-6)


def test_rate_zero_keeps_everything():
    np.testing.assert_array_equal(rand_ops.dropout(X, rate=0.0, seed=[1, 1]), X)


@pytest.mark.parametrize("rate", [np.float32(0.25), np.array(0.25), 0.25])
def test_rate_may_be_any_real_number(rate):
    """The original only compares the rate with 0 and 1: NumPy values work as floats."""
    np.testing.assert_array_equal(
        rand_ops.dropout(X, rate=rate, seed=[3, 4]), rand_ops.dropout(X, rate=0.25, seed=[3, 4])
    )
    np.testing.assert_array_equal(rand_ops.dropout(X, rate=False, seed=[3, 4]), X)


@pytest.mark.parametrize("rate", [1.0, -0.1, 1.5])
def test_rate_must_be_a_probability_below_one(rate):
    with pytest.raises(
        ValueError, match=f"The rate must be in the range \\[0, 1\\), but was {rate}"
    ):
        rand_ops.dropout(X, rate=rate)


def test_seed_must_be_a_pair():
    with pytest.raises(
        ValueError, match=r"Expected the seed to have a shape \[2\], but got \(3,\)"
    ):
        rand_ops.dropout(X, seed=[1, 2, 3])


def test_unseeded_dropout_in_a_compiled_region_repeats_after_reset_ipu_seed(ipu_system):
    from openipu._src.compiler import ipu_compiler, scopes

    def run():
        with scopes.ipu_scope("/device:IPU:0"):
            (out,) = ipu_compiler.compile(lambda v: rand_ops.dropout(v, rate=0.5), [X])
        return out.numpy()

    seeds.reset_ipu_seed(77)
    first = run()
    assert abs((first == 0).mean() - 0.5) < 0.05
    seeds.reset_ipu_seed(77)
    np.testing.assert_array_equal(run(), first)
