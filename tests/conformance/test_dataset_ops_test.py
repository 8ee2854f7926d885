"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/dataset_ops_test.py`.

`ipu.data.ops.dataset_ops.BufferDataset` over 3 elements with a buffer of 2: the first
two elements come through in order, then the dataset ends (the incomplete buffer is
not given).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu


@pytest.mark.follows("testBufferDataset")
def test_buffer_dataset(tf1_graph):
    dataset = tu.create_single_increasing_dataset(10, shape=[4, 4]).take(3)
    dataset = ipu.data.ops.dataset_ops.BufferDataset(dataset, 2)
    next_data = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    with tf.compat.v1.Session(graph=tf1_graph) as sess:
        np.testing.assert_array_equal(sess.run(next_data)[0], np.zeros([4, 4]))
        np.testing.assert_array_equal(sess.run(next_data)[0], np.ones([4, 4]))
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(next_data)
