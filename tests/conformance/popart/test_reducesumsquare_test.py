"""graphcore/popart tests/integration/operators_test/reducesumsquare_test.py: ReduceSumsquare over
every combination of axes and keepdims, inference and gradients (Cpu)."""

import numpy as np
import pytest
import tensorflow as tf
from popart_reduce_checks import check_reduce_inference, check_reduce_training


def _numpy(x, axis, keepdims):
    return np.sum(np.square(x), axis=axis, keepdims=keepdims)


def _tf(x, axis, keepdims):
    return tf.reduce_sum(tf.square(x), axis, keepdims)


@pytest.mark.follows("test_reducesumsquare")
def test_reducesumsquare(op_tester):
    data = np.random.rand(5, 3, 7).astype(np.float32)
    check_reduce_inference(op_tester, "sumsquare", _numpy, data)


@pytest.mark.follows("test_reducesumsquare_training")
def test_reducesumsquare_training(op_tester, grad_of):
    data = np.random.rand(2, 5, 3).astype(np.float32)
    check_reduce_training(op_tester, "sumsquare", _tf, grad_of, data)
