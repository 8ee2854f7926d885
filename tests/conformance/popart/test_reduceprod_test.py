"""graphcore/popart tests/integration/operators_test/reduceprod_test.py: ReduceProd over
every combination of axes and keepdims, inference and gradients (Cpu)."""

import numpy as np
import pytest
import tensorflow as tf
from popart_reduce_checks import check_reduce_inference, check_reduce_training


def _numpy(x, axis, keepdims):
    return np.prod(x, axis=axis, keepdims=keepdims)


def _tf(x, axis, keepdims):
    return tf.reduce_prod(x, axis, keepdims)


@pytest.mark.follows("test_reduceprod")
def test_reduceprod(op_tester):
    data = np.random.rand(5, 3, 7).astype(np.float32)
    check_reduce_inference(op_tester, "prod", _numpy, data)


@pytest.mark.follows("test_reduceprod_training")
def test_reduceprod_training(op_tester, grad_of):
    data = np.random.rand(2, 5, 3).astype(np.float32)
    data[1, 1, 1] = 0.0  # a zero in the input, with gradients
    check_reduce_training(op_tester, "prod", _tf, grad_of, data)
