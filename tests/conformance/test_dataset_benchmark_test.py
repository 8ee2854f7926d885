"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/dataset_benchmark_test.py`.

`dataset_benchmark` and `infeed_benchmark` in TF1 sessions return a JSON report with
one entry per epoch, every field positive; a dataset with a zero-size dimension is
refused when the benchmark runs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _increasing(n, shape):
    return (
        tf.data.Dataset.range(n)
        .map(lambda i: tf.fill(list(shape), tf.cast(i, tf.float32)))
        .repeat()
    )


def _check_report(report, epochs):
    parsed = json.loads(report[0])
    assert len(parsed["epochs"]) == epochs
    for epoch in parsed["epochs"]:
        for field in epoch:
            assert np.all(np.asarray(epoch[field]) > 0.0), field


@pytest.mark.follows("testWithDataset")
def test_with_dataset(tf1_graph):
    op = ipu.dataset_benchmark.dataset_benchmark(_increasing(10, [4, 4]), 10, 1000)
    with tf.compat.v1.Session() as sess:
        _check_report(sess.run(op), 10)


@pytest.mark.follows("testWithInfeed")
def test_with_infeed(tf1_graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [4, 4]))
    op = ipu.dataset_benchmark.infeed_benchmark(infeed, 5, 256)
    with tf.compat.v1.Session() as sess:
        _check_report(sess.run(op), 5)


@pytest.mark.follows("testShape0Dim")
def test_shape_0_dim(tf1_graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [4, 0]))
    op = ipu.dataset_benchmark.infeed_benchmark(infeed, 5, 256)
    with tf.compat.v1.Session() as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match="Detected a tensor in the dataset with a dimension of size 0",
        ):
            sess.run(op)
