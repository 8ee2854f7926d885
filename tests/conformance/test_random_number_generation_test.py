"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/random_number_generation_test.py`.

Stateless random operations (truncated normal, normal, uniform floats and integers) on the
IPU, alone and in every combination: the same seed gives the same numbers run after run,
the seed's words swapped give other numbers. The original runs each case 100 times per
seed; here 5 (the emulated device's numbers do not drift with the repetitions).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1

SEEDS = [0x01234567, 0x89ABCDEF]
REPEATS = 5


@pytest.fixture(scope="module")
def program():
    graph = tf.Graph()
    with graph.as_default():
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            seed = v1.placeholder(np.int32, [2])
            ops = {
                "truncated_normal": tf.random.stateless_truncated_normal(
                    shape=[1000], seed=seed, dtype=np.float32
                ),
                "normal": tf.random.stateless_normal(shape=[1000], seed=seed, dtype=np.float32),
                "uniform_float": tf.random.stateless_uniform(
                    shape=[1000], seed=seed, dtype=np.float32
                ),
                "uniform_int": tf.random.stateless_uniform(
                    shape=[1000], seed=seed, minval=0, maxval=1000, dtype=np.int32
                ),
            }
        config = ipu.config.IPUConfig()
        config.configure_ipu_system()
        with v1.Session(graph=graph) as session:
            yield session, seed, ops
    ipu.config.reset_ipu_configuration()


def _compare_ops(program, names):
    session, seed, ops = program
    fetches = [ops[name] for name in names]
    refs = session.run(fetches, {seed: SEEDS})
    for _ in range(REPEATS):
        for ref, value in zip(refs, session.run(fetches, {seed: SEEDS}), strict=True):
            np.testing.assert_array_equal(value, ref)
    for _ in range(REPEATS):
        swapped = session.run(fetches, {seed: list(reversed(SEEDS))})
        for ref, value in zip(refs, swapped, strict=True):
            assert not np.array_equal(value, ref)
    # And they have their distributions (the IPU's generator is not TensorFlow's CPU one).
    for name, value in zip(names, refs, strict=True):
        _check_distribution(name, value)


def _check_distribution(name, value):
    if name == "truncated_normal":
        assert np.all(np.abs(value) <= 2.0) and abs(value.mean()) < 0.15
        assert 0.75 < value.std() < 0.95  # A normal cut at 2 sigma: std 0.88.
    elif name == "normal":
        assert abs(value.mean()) < 0.15 and 0.9 < value.std() < 1.1
    elif name == "uniform_float":
        assert np.all((value >= 0) & (value < 1)) and abs(value.mean() - 0.5) < 0.05
    else:
        assert value.dtype == np.int32 and np.all((value >= 0) & (value < 1000))
        assert len(np.unique(value)) > 500


@pytest.mark.follows("test_tuncated_normal")
def test_truncated_normal(program):
    _compare_ops(program, ["truncated_normal"])


@pytest.mark.follows("test_normal")
def test_normal(program):
    _compare_ops(program, ["normal"])


@pytest.mark.follows("test_uniform_float")
def test_uniform_float(program):
    _compare_ops(program, ["uniform_float"])


@pytest.mark.follows("test_uniform_integer")
def test_uniform_integer(program):
    _compare_ops(program, ["uniform_int"])


@pytest.mark.follows("test_tuncated_normal_and_normal")
def test_truncated_normal_and_normal(program):
    _compare_ops(program, ["truncated_normal", "normal"])


@pytest.mark.follows("test_tuncated_normal_and_uniform_float")
def test_truncated_normal_and_uniform_float(program):
    _compare_ops(program, ["truncated_normal", "uniform_float"])


@pytest.mark.follows("test_tuncated_normal_and_uniform_int")
def test_truncated_normal_and_uniform_int(program):
    _compare_ops(program, ["truncated_normal", "uniform_int"])


@pytest.mark.follows("test_normal_and_uniform_float")
def test_normal_and_uniform_float(program):
    _compare_ops(program, ["normal", "uniform_float"])


@pytest.mark.follows("test_normal_and_uniform_int")
def test_normal_and_uniform_int(program):
    _compare_ops(program, ["normal", "uniform_int"])


@pytest.mark.follows("test_uniform_float_and_uniform_int")
def test_uniform_float_and_uniform_int(program):
    _compare_ops(program, ["uniform_float", "uniform_int"])


@pytest.mark.follows("test_tuncated_normal_and_normal_and_uniform_float")
def test_truncated_normal_and_normal_and_uniform_float(program):
    _compare_ops(program, ["truncated_normal", "normal", "uniform_float"])


@pytest.mark.follows("test_tuncated_normal_and_normal_and_uniform_int")
def test_truncated_normal_and_normal_and_uniform_int(program):
    _compare_ops(program, ["truncated_normal", "normal", "uniform_int"])


@pytest.mark.follows("test_tuncated_normal_and_uniform_float_and_uniform_int")
def test_truncated_normal_and_uniform_float_and_uniform_int(program):
    _compare_ops(program, ["truncated_normal", "uniform_float", "uniform_int"])


@pytest.mark.follows("test_normal_and_uniform_float_and_uniform_int")
def test_normal_and_uniform_float_and_uniform_int(program):
    _compare_ops(program, ["normal", "uniform_float", "uniform_int"])


@pytest.mark.follows("test_all")
def test_all(program):
    _compare_ops(program, ["truncated_normal", "normal", "uniform_float", "uniform_int"])
