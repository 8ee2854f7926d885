"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/ipu_estimator_replicated_test.py`.

`IPUEstimator` on replicated (and sharded) devices of 4 IPUs: losses and metrics are
cross-replica values, predictions come from every replica, and training without a
cross-replica reduction is refused. TensorFlow 2.21 has no `tf.estimator`: where the
original returns the stock `EstimatorSpec`, these tests return `IPUEstimatorSpec`.
"""

from __future__ import annotations

import glob

import numpy as np
import pytest
import tensorflow as tf
from session_hooks import SessionRunCounter
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_estimator, ipu_run_config, ipu_session_run_hooks
from tensorflow.python.ipu import test_utils as tu
from tensorflow.python.ipu.gradient_accumulation import GradientAccumulationReductionMethod
from tensorflow.python.ipu.ops import replication_ops
from tensorflow.python.ipu.optimizers import (
    cross_replica_optimizer,
    gradient_accumulation_optimizer,
    sharded_optimizer,
)
from tensorflow.python.summary import summary_iterator

v1 = tf.compat.v1
Spec = ipu_estimator.IPUEstimatorSpec


@pytest.fixture(autouse=True)
def unconfigured_system():
    # An estimator configures the system from its ipu_options: no test inherits another's.
    yield
    ipu.config.reset_ipu_configuration()


def _config(tmp_path, iterations_per_loop=1, num_replicas=4, num_shards=1, **run_config):
    options = ipu.config.IPUConfig()
    options.auto_select_ipus = 4
    return ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(
            iterations_per_loop=iterations_per_loop,
            num_replicas=num_replicas,
            num_shards=num_shards,
            ipu_options=options,
        ),
        model_dir=str(tmp_path),
        **run_config,
    )


def _regression_dataset():
    np.random.seed(1234)
    target_weights = np.random.rand(5, 1).astype(np.float32)
    x = np.random.rand(1000, 5).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((x, x @ target_weights))
    return dataset.batch(batch_size=2, drop_remainder=True).repeat()


def _train_and_read_losses(model_fn, input_fn, config, num_steps):
    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=config)
    counter = SessionRunCounter()
    estimator.train(input_fn=input_fn, steps=num_steps, hooks=[counter])
    assert counter.num_session_runs == num_steps // config.ipu_run_config.iterations_per_loop
    [events_file] = glob.glob(estimator.model_dir + "/*tfevents*")
    return [
        v.simple_value
        for event in summary_iterator.summary_iterator(events_file)
        for v in event.summary.value
        if "loss" in v.tag
    ]


@pytest.mark.follows("testTrainReplicated")
def test_train_replicated(tmp_path):
    def my_model_fn(features, labels, mode):
        assert mode == "train"
        loss = ipu.ops.cross_replica_ops.cross_replica_sum(features, name="loss")
        return Spec(mode=mode, loss=loss, train_op=tf.identity(loss))

    def my_input_fn():
        dataset = tu.create_dual_increasing_dataset(10, data_shape=[1], label_shape=[1])
        return dataset.batch(batch_size=1, drop_remainder=True)

    config = _config(tmp_path, 2, log_step_count_steps=1, save_summary_steps=1)
    losses = _train_and_read_losses(my_model_fn, my_input_fn, config, 6)
    # Replicas read 0..3, 4..7, then 8, 9, 0, 1, ...: cross-replica sums averaged per loop.
    np.testing.assert_allclose(losses, [14.0, 16.0, 18.0])


@pytest.mark.parametrize(
    ("use_gradient_accumulation", "reduction_method"),
    [(False, GradientAccumulationReductionMethod.SUM)]
    + [(True, method) for method in GradientAccumulationReductionMethod],
)
@pytest.mark.follows("testTrainReplicatedOnRegressionDataset")
def test_train_replicated_on_regression_dataset(
    tmp_path, use_gradient_accumulation, reduction_method
):
    iterations_per_loop = 2

    def my_model_fn(features, labels, mode):
        with v1.variable_scope("vs", use_resource=True):
            predictions = tf.keras.layers.Dense(units=1)(features)
        loss = v1.losses.mean_squared_error(labels=labels, predictions=predictions)
        optimizer = sharded_optimizer.ShardedOptimizer(v1.train.GradientDescentOptimizer(0.1))
        if use_gradient_accumulation:
            optimizer = gradient_accumulation_optimizer.CrossReplicaGradientAccumulationOptimizerV2(
                optimizer, iterations_per_loop, reduction_method=reduction_method
            )
        else:
            optimizer = cross_replica_optimizer.CrossReplicaOptimizer(optimizer)
        return Spec(mode=mode, loss=loss, train_op=optimizer.minimize(loss))

    config = _config(tmp_path, iterations_per_loop, log_step_count_steps=1, save_summary_steps=1)
    losses = _train_and_read_losses(my_model_fn, _regression_dataset, config, 6)
    assert len(losses) == 3
    assert losses[0] > losses[-1]


@pytest.mark.follows("testShardedAndReplicatedTraining")
def test_sharded_and_replicated_training(tmp_path):
    def my_model_fn(features, labels, mode):
        with v1.variable_scope("vs", use_resource=True):
            with ipu.scopes.ipu_shard(0):
                out_0 = tf.keras.layers.Dense(units=1)(features)
            with ipu.scopes.ipu_shard(1):
                predictions = tf.keras.layers.Dense(units=1)(out_0)
        loss = v1.losses.mean_squared_error(labels=labels, predictions=predictions)
        optimizer = cross_replica_optimizer.CrossReplicaOptimizer(
            sharded_optimizer.ShardedOptimizer(v1.train.GradientDescentOptimizer(0.1))
        )
        return Spec(mode=mode, loss=loss, train_op=optimizer.minimize(loss))

    config = _config(
        tmp_path, 2, num_replicas=2, num_shards=2, log_step_count_steps=1, save_summary_steps=1
    )
    losses = _train_and_read_losses(my_model_fn, _regression_dataset, config, 10)
    assert len(losses) == 5
    assert losses[0] > losses[-1]


@pytest.mark.follows("testReplicatedEvaluation")
def test_replicated_evaluation(tmp_path):
    def my_input_fn():
        # Replica means 2, 4, 2, 4; maxima 3, 5, 3, 5.
        features = [[1.0], [3.0], [5.0], [3.0], [1.0], [3.0], [5.0], [3.0]]
        return tf.data.Dataset.from_tensor_slices(features).batch(2, drop_remainder=True)

    def my_model_fn(features, mode):
        return Spec(
            mode,
            loss=tf.reduce_max(features),
            eval_metric_ops={"feature_mean": v1.metrics.mean(features)},
        )

    estimator = ipu_estimator.IPUEstimator(model_fn=my_model_fn, config=_config(tmp_path))
    scores = estimator.evaluate(my_input_fn, steps=1)
    assert scores["feature_mean"] == 3.0
    assert scores["loss"] == 4.0


@pytest.mark.follows("testReplicatedEvaluationOnHost")
def test_replicated_evaluation_on_host(tmp_path):
    def my_input_fn():
        features = [0, 0, 0, 1, 0, 0, 0, 1]
        labels = [0, 1, 0, 1, 0, 1, 0, 1]
        return tf.data.Dataset.from_tensor_slices((features, labels)).batch(2, True)

    def my_metrics_fn(features, labels):
        labels64 = tf.cast(labels, np.int64)
        return {
            "accuracy": v1.metrics.accuracy(labels, features),
            "precision": v1.metrics.precision(labels, features),
            "recall": v1.metrics.recall(labels, features),
            "recall_at_1": v1.metrics.recall_at_k(labels64, features, k=1),
            "recall_at_2": v1.metrics.recall_at_k(labels64, features, k=2),
            "mse": v1.metrics.mean_squared_error(labels, features),
            "rmse": v1.metrics.root_mean_squared_error(labels, features),
        }

    def my_model_fn(features, labels, mode):
        loss = tf.cast(replication_ops.replication_index(), np.float32)
        return Spec(mode, loss=loss, eval_metrics=(my_metrics_fn, [features, labels]))

    estimator = ipu_estimator.IPUEstimator(model_fn=my_model_fn, config=_config(tmp_path))
    scores = estimator.evaluate(my_input_fn, steps=1)
    expected = {
        "accuracy": 0.75,
        "precision": 1.0,
        "recall": 0.5,
        "recall_at_1": 0.5,
        "recall_at_2": 1.0,
        "mse": 0.25,
        "rmse": 0.5,
        "loss": 1.5,  # the mean of the replica indices
    }
    assert {name: scores[name] for name in expected} == expected


@pytest.mark.follows("testReplicatedPrediction")
def test_replicated_prediction(tmp_path):
    def my_input_fn():
        features = [[1.0], [3.0], [5.0], [3.0], [7.0], [3.0], [9.0], [3.0]]
        return tf.data.Dataset.from_tensor_slices(features).batch(2, drop_remainder=True)

    hook = ipu_session_run_hooks.IPULoggingTensorHook(every_n_iter=1)

    def my_model_fn(features, mode):
        with tf.control_dependencies([hook.log({"features": features})]):
            return Spec(mode, predictions=tf.reduce_max(features))

    estimator = ipu_estimator.IPUEstimator(model_fn=my_model_fn, config=_config(tmp_path))
    outputs = estimator.predict(input_fn=my_input_fn, yield_single_examples=True)
    assert next(outputs) == 3.0
    assert next(outputs) == 5.0
    outputs = estimator.predict(input_fn=my_input_fn, yield_single_examples=False, hooks=[hook])
    np.testing.assert_array_equal(next(outputs), [3.0, 5.0, 7.0, 9.0])


@pytest.mark.follows("testReplicatedTrainingWithoutCrossReplicaSumShouldThrow")
def test_replicated_training_without_cross_replica_sum_should_throw(tmp_path):
    def my_model_fn(features, mode):
        loss = tf.reduce_sum(features)
        return Spec(mode, loss=loss, train_op=tf.identity(loss))

    estimator = ipu_estimator.IPUEstimator(model_fn=my_model_fn, config=_config(tmp_path))
    with pytest.raises(ValueError, match="This is not a valid replicated training graph"):
        estimator.train(input_fn=lambda: tf.data.Dataset.from_tensor_slices([]), steps=1)
