"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/popit_test.py`.

Operations placed on the original's PopIt device (`/device:POPIT:0`, an eager IPU
device) compute what they compute on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf


@pytest.mark.follows("testSimpleAdd")
def test_simple_add():
    with tf.device("/device:POPIT:0"):
        a = tf.constant([1, 2, 3, 4, 5, 6])
        b = tf.constant([0, 1, 2, 3, 4, 5])
        c = a + b
    np.testing.assert_array_equal(c.numpy(), np.array([1, 3, 5, 7, 9, 11]))
