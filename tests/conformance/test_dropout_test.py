"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/dropout_test.py`.

`ipu.ops.rand_ops.dropout` compiled for the IPU on the original's cases (rate 0.5, a user
seed or none, the whole shape or a noise shape): the refused noise shapes (the original's
messages), the fraction kept, repeatable results with a user seed, the gradient zero where
the output is, and the scaling of the kept values.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1

THRESHOLD = 0.1
DIMS = (64, 64, 4)
SEED = np.array([12345, 67890], dtype=np.int32)
SEED_TEST_REPETITIONS = 6
_CASES = [
    pytest.param(0.5, seed, noise_shape, id=f"Case{n}")
    for n, (seed, noise_shape) in enumerate(
        [(SEED, []), (SEED, [DIMS[0], DIMS[1], 1]), (None, []), (None, [DIMS[0], DIMS[1], 1])]
    )
]


@pytest.fixture
def setup(tf1_graph):
    """Compiles `f` on a placeholder of DIMS, then configures one IPU (as the original)."""

    def setup_test(f):
        with tf.device("cpu"):
            input_data = v1.placeholder(np.float32, DIMS)
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            r = ipu.ipu_compiler.compile(f, inputs=[input_data])
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = 1
        config.configure_ipu_system()
        return r, input_data

    yield setup_test
    ipu.config.reset_ipu_configuration()


def _ipu_dropout(w, rate, seed, noise_shape, ref):
    return [ipu.ops.rand_ops.dropout(w, rate=rate, seed=seed, noise_shape=noise_shape, ref=ref)]


@pytest.mark.follows("testInvalidNoiseShape")
def test_invalid_noise_shape(setup):
    seed = np.array([12, 34], dtype=np.int32)
    with pytest.raises(ValueError, match="must equal the rank of x."):
        setup(lambda w: _ipu_dropout(w, 0.5, seed, [1], False))
    with pytest.raises(ValueError, match="Dimension mismatch"):
        setup(lambda w: _ipu_dropout(w, 0.5, seed, [8, 1, 16], False))


@pytest.mark.follows("testDropout")
@pytest.mark.parametrize(("rate", "seed", "noise_shape"), _CASES)
def test_dropout(setup, rate, seed, noise_shape):
    r, input_data = setup(lambda w: _ipu_dropout(w, rate, seed, noise_shape, False))
    in_data = np.random.default_rng(0).random(DIMS) + 0.01
    with v1.Session() as sess:
        result = sess.run(r, {input_data: in_data})
    percent_kept = np.count_nonzero(np.array(result)) / np.count_nonzero(in_data)
    assert abs(percent_kept - (1.0 - rate)) < THRESHOLD


@pytest.mark.follows("testUserSeed")
@pytest.mark.parametrize(("rate", "seed", "noise_shape"), _CASES[:2])
def test_user_seed(setup, rate, seed, noise_shape):
    r, input_data = setup(lambda w: _ipu_dropout(w, rate, seed, noise_shape, False))
    in_data = np.random.default_rng(1).random(DIMS)
    with v1.Session() as sess:
        first = sess.run(r, {input_data: in_data})
        for _ in range(SEED_TEST_REPETITIONS - 1):
            np.testing.assert_array_equal(sess.run(r, {input_data: in_data}), first)


@pytest.mark.follows("testDropoutBackwardPass")
@pytest.mark.parametrize(("rate", "seed", "noise_shape"), _CASES)
def test_dropout_backward_pass(setup, rate, seed, noise_shape):
    def run_dropout(w):
        output = _ipu_dropout(w, rate, seed, noise_shape, True)
        opt = v1.train.GradientDescentOptimizer(learning_rate=0.1)
        return [output, opt.compute_gradients(tf.square(output), w)]

    r, input_data = setup(run_dropout)
    in_data = np.random.default_rng(2).random(DIMS) + 0.01
    with v1.Session() as sess:
        result = sess.run(r, {input_data: in_data})
    dropout_out, gradients = np.asarray(result[0]).reshape(DIMS), result[1][0][0]
    np.testing.assert_array_equal(dropout_out != 0, gradients != 0)


@pytest.mark.follows("testScaling")
@pytest.mark.parametrize(("rate", "seed", "noise_shape"), _CASES)
def test_scaling(setup, rate, seed, noise_shape):
    r, input_data = setup(lambda w: _ipu_dropout(w, rate, seed, noise_shape, False))
    with v1.Session() as sess:
        [result] = sess.run(r, {input_data: np.ones(DIMS)})
    kept_values = result[np.nonzero(result)]
    assert kept_values.size > 0
    np.testing.assert_allclose(kept_values, np.full(kept_values.shape, 1 / (1 - rate)))
