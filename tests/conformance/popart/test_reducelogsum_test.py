"""graphcore/popart tests/integration/operators_test/reducelogsum_test.py: ReduceLogsum over
every combination of axes and keepdims, inference and gradients (Cpu)."""

import numpy as np
import pytest
import tensorflow as tf
from popart_reduce_checks import check_reduce_inference, check_reduce_training


def _numpy(x, axis, keepdims):
    return np.log(np.sum(x, axis=axis, keepdims=keepdims))


def _tf(x, axis, keepdims):
    return tf.math.log(tf.reduce_sum(x, axis, keepdims))


@pytest.mark.follows("test_reducelogsum")
def test_reducelogsum(op_tester):
    data = np.random.rand(5, 3, 7).astype(np.float32)
    check_reduce_inference(op_tester, "logsum", _numpy, data)


@pytest.mark.follows("test_reducelogsum_training")
def test_reducelogsum_training(op_tester, grad_of):
    data = np.random.rand(2, 5, 3).astype(np.float32)
    check_reduce_training(op_tester, "logsum", _tf, grad_of, data)
