"""Operations a compiled program computes as the IPU does (`engine/op_rewrites.py`)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf


def test_float_to_unsigned_casts_wrap_as_on_the_ipu(strategy_on):
    # The original's infeed_outfeed_test.py testFeedInt8: -1.0 becomes 255 as uint8.
    strategy = strategy_on(1)
    values = np.array([-1.0, -3.7, 3.7, 255.0, 256.0, 300.0], np.float32)
    to_uint8 = tf.function(lambda x: tf.cast(x, tf.uint8), jit_compile=True)
    got = strategy.run(to_uint8, args=(tf.constant(values),)).numpy()
    # Through a signed integer (truncating towards zero), then modulo 2 ** 8.
    np.testing.assert_array_equal(got, np.trunc(values).astype(np.int64) % 256)


@pytest.mark.parametrize("unique", [False, True])
def test_seeded_candidate_samplers_sample_alike_every_run(strategy_on, unique):
    # compiler/plugin/poplar/kernels/poprand/candidate_sampler.cc: a constant seed when the
    # op's seeds are set, so every run samples the same candidates.
    strategy = strategy_on(1)
    k, n = 20, 50
    true_classes = tf.constant([[3, 7]], tf.int64)

    def sample(seed):
        return tf.random.uniform_candidate_sampler(
            true_classes, num_true=2, num_sampled=k, unique=unique, range_max=n, seed=seed
        )

    seeded = tf.function(lambda: sample(42), jit_compile=True)
    first, second = strategy.run(seeded), strategy.run(seeded)
    other = strategy.run(tf.function(lambda: sample(7), jit_compile=True))
    np.testing.assert_array_equal(first[0], second[0])
    assert not np.array_equal(first[0], other[0])
    candidates = first[0].numpy()
    assert ((candidates >= 0) & (candidates < n)).all()
    if not unique:
        # range_sampler.cc: each class k / n times, in expectation.
        np.testing.assert_allclose(first[1], np.full([1, 2], k / n), rtol=1e-6)
        return
    assert len(set(candidates)) == k
    # 1 - (1 - 1/n) ** tries, with at least k tries: between k / n's and 1.
    assert (first[2].numpy() >= 1 - (1 - 1 / n) ** k - 1e-6).all()
    np.testing.assert_allclose(first[1].numpy()[0, 0], first[2].numpy()[0], rtol=1e-6)
