"""`IPUEstimator` on several IPUs: replicas (`num_replicas`) and shards (`num_shards`).

As the original's ipu_estimator_replicated_test.py: each replica reads its own batches of
`train_batch_size / num_replicas` (params['batch_size']), the CrossReplicaOptimizer
averages the gradients, so training equals plain TensorFlow on the global batch; a sharded
model (`ipu.scopes.ipu_shard`) computes what the unsharded one does.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from estimator_models import dense_loss, plain_tf_training, regression_data
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_estimator, ipu_run_config

v1 = tf.compat.v1
LEARNING_RATE = 0.1


def _config(replicas: int, shards: int, iterations_per_loop: int = 2) -> ipu_run_config.RunConfig:
    options = ipu.config.IPUConfig()
    options.auto_select_ipus = replicas * shards
    return ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(
            iterations_per_loop=iterations_per_loop,
            num_replicas=replicas,
            num_shards=shards,
            ipu_options=options,
        )
    )


def _sharded_dense_loss(features, labels):
    """The same dense model, its matmul on shard 0 and its loss on shard 1."""
    with ipu.scopes.ipu_shard(0), v1.variable_scope("vs", use_resource=True):
        kernel = v1.get_variable(
            "kernel", [features.shape[-1], 1], initializer=v1.constant_initializer(0.1)
        )
        bias = v1.get_variable("bias", [1], initializer=v1.zeros_initializer())
        predictions = tf.matmul(features, kernel) + bias
    with ipu.scopes.ipu_shard(1):
        return v1.losses.mean_squared_error(labels=labels, predictions=predictions)


def _model_fn(sharded: bool):
    def model_fn(features, labels, mode, params):
        assert features.shape[0] == params["batch_size"]
        loss = (_sharded_dense_loss if sharded else dense_loss)(features, labels)
        optimizer = ipu.optimizers.CrossReplicaOptimizer(
            v1.train.GradientDescentOptimizer(LEARNING_RATE)
        )
        return ipu_estimator.IPUEstimatorSpec(
            mode=mode, loss=loss, train_op=optimizer.minimize(loss)
        )

    return model_fn


def _input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices(regression_data())
    return dataset.batch(params["batch_size"], drop_remainder=True).repeat()


def _global_batches(global_batch: int, steps: int):
    x, y = regression_data()
    return [
        (x[i * global_batch : (i + 1) * global_batch], y[i * global_batch : (i + 1) * global_batch])
        for i in range(steps)
    ]


class _LossRecorder(v1.train.SessionRunHook):
    def __init__(self):
        self.losses = []

    def begin(self):
        self._loss = v1.get_collection(v1.GraphKeys.SUMMARIES)[-1].op.inputs[1]

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        self.losses.append(run_values.results)


@pytest.mark.parametrize(
    ("replicas", "shards"),
    [(2, 1), (1, 2), pytest.param(2, 2, marks=pytest.mark.slow)],
)
def test_training_equals_plain_tensorflow_on_the_global_batch(tmp_path, replicas, shards):
    estimator = ipu_estimator.IPUEstimator(
        model_fn=_model_fn(sharded=shards > 1),
        model_dir=str(tmp_path),
        config=_config(replicas, shards),
        train_batch_size=4,
    )
    recorder = _LossRecorder()
    estimator.train(_input_fn, steps=4, hooks=[recorder])
    # Replica r of step i read batch i * R + r: together, the global batch of step i.
    kernel, bias, losses = plain_tf_training(_global_batches(4, 4), LEARNING_RATE)
    np.testing.assert_allclose(estimator.get_variable_value("vs/kernel"), kernel, rtol=1e-5)
    np.testing.assert_allclose(estimator.get_variable_value("vs/bias"), bias, rtol=1e-5)
    # The loss of a run: the mean over its steps and replicas.
    np.testing.assert_allclose(
        recorder.losses, [np.mean(losses[:2]), np.mean(losses[2:])], rtol=1e-5
    )


def test_replicated_predictions_come_in_the_input_order():
    def model_fn(features, mode):
        return ipu_estimator.IPUEstimatorSpec(mode, predictions=features * 10)

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config(2, 1))

    def input_fn():
        return tf.data.Dataset.range(8).map(lambda i: tf.cast(tf.reshape(i, [1]), tf.float32))

    predictions = [float(p) for p in estimator.predict(input_fn)]
    assert predictions == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]


def test_sharded_ops_run_on_their_shards_ipu(tmp_path):
    devices = {}

    def model_fn(features, labels, mode):
        loss = _sharded_dense_loss(features, labels)
        graph = v1.get_default_graph()
        matmul = [op for op in graph.get_operations() if op.type == "MatMul"][-1]
        devices["matmul"] = matmul.device
        devices["loss"] = loss.op.device
        train_op = v1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
        return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(regression_data()).batch(4, True).repeat()

    estimator = ipu_estimator.IPUEstimator(
        model_fn=model_fn, model_dir=str(tmp_path), config=_config(1, 2, 1)
    )
    estimator.train(input_fn, steps=2)
    assert devices["matmul"] != devices["loss"]
    kernel, _, _ = plain_tf_training(_global_batches(4, 2), LEARNING_RATE)
    np.testing.assert_allclose(estimator.get_variable_value("vs/kernel"), kernel, rtol=1e-5)


def test_replicated_training_without_a_cross_replica_reduction_is_refused(tmp_path):
    # The original's testReplicatedTrainingWithoutCrossReplicaSumShouldThrow: replicas that
    # never reduce their gradients would train apart.
    def input_fn(params):
        data = np.ones([8, 2], np.float32)
        return tf.data.Dataset.from_tensor_slices(data).batch(params["batch_size"], True)

    def model_fn(features, mode):
        loss = tf.reduce_sum(features)
        return ipu_estimator.IPUEstimatorSpec(mode, loss=loss, train_op=tf.identity(loss))

    estimator = ipu_estimator.IPUEstimator(
        model_fn=model_fn,
        config=_config(replicas=2, shards=1, iterations_per_loop=1),
        model_dir=str(tmp_path),
        train_batch_size=4,
    )
    with pytest.raises(ValueError, match="This is not a valid replicated training graph"):
        estimator.train(input_fn=input_fn, steps=1)


def test_one_replica_trains_without_a_cross_replica_reduction(tmp_path):
    def input_fn(params):
        data = np.ones([8, 2], np.float32)
        return tf.data.Dataset.from_tensor_slices(data).batch(params["batch_size"], True)

    def model_fn(features, mode):
        loss = tf.reduce_sum(features)
        return ipu_estimator.IPUEstimatorSpec(mode, loss=loss, train_op=tf.identity(loss))

    estimator = ipu_estimator.IPUEstimator(
        model_fn=model_fn,
        config=_config(replicas=1, shards=1, iterations_per_loop=1),
        model_dir=str(tmp_path),
        train_batch_size=4,
    )
    estimator.train(input_fn=input_fn, steps=1)
    assert estimator.get_variable_value("global_step") == 1
