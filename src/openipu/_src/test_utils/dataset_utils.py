"""Datasets of increasing values (tensorflow/python/ipu/test_utils/dataset_utils.py)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def create_multi_increasing_dataset(value, shapes=None, dtypes=None, repeat=True):
    """Element i (for i in range(value)) is one tensor per shape, each filled with i."""
    shapes = shapes if shapes else [[1, 32, 32, 4], [1, 8]]
    dtypes = dtypes if dtypes else [np.float32, np.float32]

    def one_input(data):
        return [
            tf.cast(tf.broadcast_to(data, shape=shape), dtype=dtypes[i])
            for i, shape in enumerate(shapes)
        ]

    dataset = tf.data.Dataset.range(value).map(one_input)
    return dataset.repeat() if repeat else dataset


def create_dual_increasing_dataset(
    value, data_shape=None, label_shape=None, dtype=np.float32, repeat=True
):
    """(data, label) pairs filled with 0, 1, ... value - 1."""
    return create_multi_increasing_dataset(
        value,
        shapes=[data_shape or [1, 32, 32, 4], label_shape or [1, 8]],
        dtypes=[dtype, dtype],
        repeat=repeat,
    )


def create_single_increasing_dataset(value, shape=None, dtype=np.float32, repeat=True):
    """Single tensors filled with 0, 1, ... value - 1."""
    return create_multi_increasing_dataset(
        value,
        shapes=[shape if shape is not None else [1, 32, 32, 4]],
        dtypes=[dtype],
        repeat=repeat,
    )
