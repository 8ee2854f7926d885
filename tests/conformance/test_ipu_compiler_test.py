"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/ipu_compiler_test.py`.

`ipu_compiler.compile` refuses a computation placed on a CPU (unless it holds no
operation of substance), also inside a worker task's device scope, and a computation
that returns an IPUEstimatorSpec or a stock EstimatorSpec. The stock class lives in
`tensorflow_estimator`, which does not import with TensorFlow 2.21 (and `tf.estimator` is
gone): a namedtuple of its name and fields stands for it, as a spec is recognised by its
class name.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _my_net(a):
    return a + a


@pytest.mark.follows("testCompileWrongDeviceRaisesException")
def test_compile_wrong_device_raises_exception(tf1_graph):
    with tf.device("/device:CPU:0"):
        a = tf.compat.v1.placeholder(np.float32, shape=[1])
        with pytest.raises(Exception, match="not placed on an IPU"):
            ipu.ipu_compiler.compile(_my_net, inputs=[a])


@pytest.mark.follows("testCompileNoopOnWrongDeviceIsOK")
def test_compile_noop_on_wrong_device_is_ok(tf1_graph):
    with tf.device("/device:CPU:0"):
        ipu.ipu_compiler.compile(lambda: tf.no_op())


@pytest.mark.follows("testCompileForDevicesInWorkerTask")
def test_compile_for_devices_in_worker_task(tf1_graph):
    with tf.device("/job:worker/task:0"):
        with tf.device("/device:IPU:0"):
            a = tf.compat.v1.placeholder(np.float32, shape=[1])
            ipu.ipu_compiler.compile(_my_net, inputs=[a])
        with tf.device("/device:CPU:0"):
            a = tf.compat.v1.placeholder(np.float32, shape=[1])
            with pytest.raises(Exception, match="not placed on an IPU"):
                ipu.ipu_compiler.compile(_my_net, inputs=[a])


@pytest.mark.follows("testCompileWrongUseOfIPUEstimatorSpec")
def test_compile_wrong_use_of_ipu_estimator_spec(tf1_graph):
    def my_net(features, labels):
        loss = features + labels
        train_op = tf.identity(loss)
        spec = ipu.ipu_estimator.IPUEstimatorSpec(mode="train", loss=loss, train_op=train_op)
        return [2, [], 1, [spec]]

    a = tf.compat.v1.placeholder(np.float32, shape=[])
    b = tf.compat.v1.placeholder(np.float32, shape=[])
    with tf.device("/device:IPU:0"):
        with pytest.raises(ValueError, match="contains an EstimatorSpec"):
            ipu.ipu_compiler.compile(my_net, inputs=[a, b])


# tensorflow_estimator's model_fn.EstimatorSpec: a namedtuple of these fields.
_EstimatorSpec = collections.namedtuple(
    "EstimatorSpec",
    "mode predictions loss train_op eval_metric_ops export_outputs training_chief_hooks "
    "training_hooks scaffold evaluation_hooks prediction_hooks",
    defaults=(None,) * 10,
)


@pytest.mark.follows("testCompileWrongUseOfEstimatorSpec")
def test_compile_wrong_use_of_estimator_spec(tf1_graph):
    def my_net(features, labels):
        loss = features + labels
        train_op = tf.identity(loss)
        spec = _EstimatorSpec(mode="train", loss=loss, train_op=train_op)
        return [2, [], 1, [spec]]

    a = tf.compat.v1.placeholder(np.float32, shape=[1])
    b = tf.compat.v1.placeholder(np.float32, shape=[1])
    with tf.device("/device:IPU:0"):
        with pytest.raises(ValueError, match="contains an EstimatorSpec"):
            ipu.ipu_compiler.compile(my_net, inputs=[a, b])
