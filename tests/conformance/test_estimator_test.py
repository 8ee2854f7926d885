"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/estimator_test.py`.

An estimator whose model_fn (two TF1 dense layers, softmax cross entropy, gradient
descent) runs on the IPU trains for 16 steps and writes one event file to its model
directory. TensorFlow 2.21 has no `tf.estimator`, so the original's stock `Estimator`
with an IPU device scope is played by the `IPUEstimator` (as in
`test_ipu_estimator_test.py`).
"""

from __future__ import annotations

import glob

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_estimator, ipu_run_config

v1 = tf.compat.v1


@pytest.fixture(autouse=True)
def unconfigured_system():
    yield
    ipu.config.reset_ipu_configuration()


def _model_fn(features, labels, mode):
    with v1.variable_scope("ascope", use_resource=True):
        x = tf.reshape(features, [-1, 4])
        x = v1.layers.dense(inputs=x, units=10)
        x = v1.layers.dense(inputs=x, units=3)
        loss = tf.reduce_mean(
            tf.nn.softmax_cross_entropy_with_logits(logits=x, labels=tf.stop_gradient(labels))
        )
        # The IPUEstimator increments the global step itself (the stock Estimator does not).
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
    return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train)


def _input_fn(params=None):
    rng = np.random.RandomState(0)
    kinds = rng.randint(0, 3, size=64)
    data = rng.rand(64, 4).astype(np.float32)
    data[np.arange(64), kinds] += rng.uniform(1.0, 3.0, size=64).astype(np.float32)
    labels = np.eye(3, dtype=np.float32)[kinds]
    return tf.data.Dataset.from_tensor_slices((data, labels)).batch(4, drop_remainder=True)


@pytest.mark.follows("testTrain")
def test_train(tmp_path):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    run_config = ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(iterations_per_loop=1, ipu_options=config)
    )
    classifier = ipu_estimator.IPUEstimator(
        model_fn=_model_fn, config=run_config, model_dir=str(tmp_path)
    )
    classifier.train(input_fn=_input_fn, steps=16)
    assert len(glob.glob(str(tmp_path / "event*"))) == 1
    assert classifier.get_variable_value("global_step") == 16
