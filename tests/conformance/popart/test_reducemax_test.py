"""graphcore/popart tests/integration/operators_test/reducemax_test.py: ReduceMax over
every combination of axes and keepdims, inference and gradients (Cpu)."""

import numpy as np
import pytest
import tensorflow as tf
from popart_reduce_checks import check_reduce_inference, check_reduce_training


def _numpy(x, axis, keepdims):
    return np.max(x, axis=axis, keepdims=keepdims)


def _tf(x, axis, keepdims):
    return tf.reduce_max(x, axis, keepdims)


@pytest.mark.follows("test_reducemax")
def test_reducemax(op_tester):
    data = np.random.rand(5, 3, 7).astype(np.float32)
    check_reduce_inference(op_tester, "max", _numpy, data)


@pytest.mark.follows("test_reducemax_training")
def test_reducemax_training(op_tester, grad_of):
    data = np.random.rand(2, 5, 3).astype(np.float32)
    check_reduce_training(op_tester, "max", _tf, grad_of, data)
