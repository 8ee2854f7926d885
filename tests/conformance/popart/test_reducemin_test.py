"""graphcore/popart tests/integration/operators_test/reducemin_test.py: ReduceMin over every
combination of axes (also negative ones) and keepdims, inference and gradients (Cpu)."""

import numpy as np
import pytest
import tensorflow as tf
from popart_reduce_checks import (
    DEFAULT_AXES,
    TRAIN_AXES,
    check_reduce_inference,
    check_reduce_training,
)


def _numpy(x, axis, keepdims):
    return np.min(x, axis=axis, keepdims=keepdims)


def _tf(x, axis, keepdims):
    return tf.reduce_min(x, axis, keepdims)


@pytest.mark.follows("test_reducemin")
def test_reducemin(op_tester):
    check_reduce_inference(op_tester, "min", _numpy, np.random.rand(5, 3, 7).astype(np.float32))


@pytest.mark.follows("test_reducemin_training")
def test_reducemin_training(op_tester, grad_of):
    data = np.random.rand(2, 5, 3).astype(np.float32)
    check_reduce_training(op_tester, "min", _tf, grad_of, data, TRAIN_AXES)


@pytest.mark.follows("test_reducemin_training_negative_axis")
def test_reducemin_training_negative_axis(op_tester, grad_of):
    data = np.random.rand(2, 5, 3).astype(np.float32)
    axes = [[0], [-1], [-2], [0, -1], [0, -2], [1, -3], [0, -1, -2], DEFAULT_AXES]
    check_reduce_training(op_tester, "min", _tf, grad_of, data, axes)
