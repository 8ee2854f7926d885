"""`reset_ipu_seed`: which random numbers repeat, and argument errors."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.system import configure, seeds
from openipu._src.utils import reset_ipu_seed


def _device_draws(replica: int = 0) -> np.ndarray:
    return seeds.generator(0, replica).normal([4]).numpy()


def _fresh_function_draws() -> np.ndarray:
    @tf.function
    def draw():
        return tf.random.uniform([4])

    return draw().numpy()


def test_same_seed_repeats_the_device_generator(ipu_system):
    reset_ipu_seed(7)
    first = _device_draws()
    reset_ipu_seed(7)
    again = _device_draws()
    reset_ipu_seed(8)
    other = _device_draws()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_generators_created_after_the_reset_follow_the_seed(ipu_system):
    reset_ipu_seed(11)
    first = _device_draws(replica=3)  # a replica whose generator did not exist yet
    reset_ipu_seed(11)
    np.testing.assert_array_equal(first, _device_draws(replica=3))


def test_same_seed_repeats_stock_random_ops_in_new_functions(ipu_system):
    reset_ipu_seed(7)
    first = _fresh_function_draws()
    eager_first = tf.random.uniform([4]).numpy()
    reset_ipu_seed(7)
    again = _fresh_function_draws()
    eager_again = tf.random.uniform([4]).numpy()
    reset_ipu_seed(8)
    other = _fresh_function_draws()
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(eager_first, eager_again)
    assert not np.array_equal(first, other)


def test_replicas_differ_unless_identical_replicas(ipu_system):
    reset_ipu_seed(5)
    assert not np.array_equal(_device_draws(0), _device_draws(1))
    reset_ipu_seed(5, experimental_identical_replicas=True)
    np.testing.assert_array_equal(_device_draws(0), _device_draws(1))


@pytest.mark.parametrize("ipu_system", [[1, 1]], indirect=True)
def test_seeds_only_the_given_device(ipu_system):
    def draw_on_device_1():
        return seeds.generator(1).normal([4]).numpy()

    reset_ipu_seed(3, device="/device:IPU:1")
    first, second = draw_on_device_1(), draw_on_device_1()
    reset_ipu_seed(3, device="/device:IPU:1")
    np.testing.assert_array_equal(first, draw_on_device_1())
    reset_ipu_seed(3, device="/device:IPU:0")  # must not rewind device 1
    np.testing.assert_array_equal(second, draw_on_device_1())


def test_accepts_numpy_integers(ipu_system):
    reset_ipu_seed(np.int64(9))
    first = _device_draws()
    reset_ipu_seed(9)
    np.testing.assert_array_equal(first, _device_draws())


def test_takes_the_seed_as_the_original_s_int_attribute(ipu_system):
    # The original's op converts the seed with int(): 9.7 seeds as 9.
    reset_ipu_seed(9.7)
    first = _device_draws()
    reset_ipu_seed(9)
    np.testing.assert_array_equal(first, _device_draws())
    reset_ipu_seed(10)
    assert not np.array_equal(first, _device_draws())


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"seed": "1"}, TypeError, "seed must be an int"),
        ({"seed": None}, TypeError, "seed must be an int"),
        ({"seed": 2**64}, ValueError, "64 bits"),
        ({"seed": 1, "device": "/device:IPU"}, tf.errors.InvalidArgumentError, "Invalid device"),
        (
            {"seed": 1, "device": "/device:IPU:5"},
            tf.errors.InternalError,
            "Invalid ordinal on seed reset: 5",
        ),
        (
            {"seed": 1, "cpu_device": "/device:IPU:0"},
            tf.errors.InvalidArgumentError,
            "not a CPU device",
        ),
        ({"seed": 1, "experimental_identical_replicas": 1}, TypeError, "must be a bool"),
    ],
)
def test_bad_arguments(ipu_system, kwargs, error, match):
    with pytest.raises(error, match=match):
        reset_ipu_seed(**kwargs)


def test_accepted_on_an_unconfigured_system():
    # As the original: the seed is stored and applies once the system is configured.
    configure.reset_ipu_configuration()
    reset_ipu_seed(1)
