"""The estimators' refusals as the original's (ipu_estimator.py, ipu_pipeline_estimator.py,
ipu_run_config.py, and the stock tensorflow_estimator Estimator/RunConfig/EstimatorSpec
they build on): same exception types and leading words, no refusal the original lacks."""

from __future__ import annotations

import types

import numpy as np
import pytest
import tensorflow as tf
from estimator_models import dense_loss, plain_tf_training, regression_data
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_estimator, ipu_run_config
from tensorflow.python.ipu.ipu_pipeline_estimator import (
    IPUPipelineEstimator,
    IPUPipelineEstimatorSpec,
)

v1 = tf.compat.v1
TRAIN = "train"


def _config(iterations_per_loop: int = 1, **kwargs) -> ipu_run_config.RunConfig:
    return ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(iterations_per_loop=iterations_per_loop),
        **kwargs,
    )


def _input_fn():
    x, y = regression_data()
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True).repeat()


def test_a_loss_of_unknown_length_is_reshaped_to_a_scalar(tmp_path):
    # tensorflow_estimator's rule: a loss whose element count is unknown (shape [None])
    # is accepted and reshaped; only a known count other than 1 is refused.
    def model_fn(features, labels, mode):
        loss = dense_loss(features, labels)
        unknown_length = v1.placeholder_with_default(tf.reshape(loss, [1]), shape=[None])
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        spec = ipu_estimator.IPUEstimatorSpec(mode=mode, loss=unknown_length, train_op=train_op)
        assert spec.loss.shape.rank == 0
        return spec

    estimator = ipu_estimator.IPUEstimator(
        model_fn=model_fn, model_dir=str(tmp_path), config=_config()
    )
    estimator.train(_input_fn, steps=3)
    x, y = regression_data()
    batches = [(x[i * 4 : (i + 1) * 4], y[i * 4 : (i + 1) * 4]) for i in range(3)]
    kernel, bias, _ = plain_tf_training(batches, 0.1)
    np.testing.assert_allclose(estimator.get_variable_value("vs/kernel"), kernel, rtol=1e-5)
    np.testing.assert_allclose(estimator.get_variable_value("vs/bias"), bias, rtol=1e-5)

    with v1.Graph().as_default():
        with pytest.raises(ValueError, match="Loss must be scalar"):
            ipu_estimator.IPUEstimatorSpec(mode=TRAIN, loss=tf.zeros([2]), train_op=tf.no_op())


def test_predict_keys_select_the_known_names():
    features = [[2.0, 3.0], [3.0, 2.0]]

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(features).batch(1, drop_remainder=True)

    def model_fn(features, mode):
        return ipu_estimator.IPUEstimatorSpec(
            mode, predictions={"twice": features * 2, "sum": tf.reduce_sum(features, axis=-1)}
        )

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config(2))
    # The stock Estimator's _extract_keys: unknown names are ignored.
    outputs = list(estimator.predict(input_fn, predict_keys=["twice", "unknown"]))
    assert all(set(o) == {"twice"} for o in outputs)
    np.testing.assert_allclose([o["twice"] for o in outputs], np.array(features) * 2)
    with pytest.raises(ValueError, match="Expected to run at least one output from"):
        next(estimator.predict(input_fn, predict_keys=["unknown"]))

    def tensor_model_fn(features, mode):
        return ipu_estimator.IPUEstimatorSpec(mode, predictions=features)

    estimator = ipu_estimator.IPUEstimator(model_fn=tensor_model_fn, config=_config(2))
    with pytest.raises(ValueError, match="predict_keys argument is not valid in case of non-dict"):
        next(estimator.predict(input_fn, predict_keys=["twice"]))


def test_hooks_of_the_calls_are_checked_with_the_stock_message():
    def model_fn(features, labels, mode):
        loss = dense_loss(features, labels)
        if mode == TRAIN:
            train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)
        if mode == "eval":
            mean = v1.metrics.mean(loss)
            return ipu_estimator.IPUEstimatorSpec(mode, loss=loss, eval_metric_ops={"m": mean})
        return ipu_estimator.IPUEstimatorSpec(mode, predictions=features)

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config())
    with pytest.raises(TypeError, match="Hooks must be a SessionRunHook, given: 3"):
        estimator.train(_input_fn, hooks=[3], steps=1)
    with pytest.raises(TypeError, match="Hooks must be a SessionRunHook, given: 3"):
        estimator.evaluate(_input_fn, hooks=[3], steps=1)
    with pytest.raises(TypeError, match="Hooks must be a SessionRunHook, given: 3"):
        next(estimator.predict(lambda: _input_fn().map(lambda x, y: x), hooks=[3]))


def test_two_hooks_feeding_one_tensor():
    class FeedingHook(v1.train.SessionRunHook):
        def begin(self):
            graph = v1.get_default_graph()
            self.tensor = graph.get_tensor_by_name("fed:0")

        def before_run(self, run_context):
            return v1.train.SessionRunArgs(None, feed_dict={self.tensor: 1.0})

    def model_fn(features, labels, mode):
        loss = dense_loss(features, labels)
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    def input_fn():
        with tf.device("/device:CPU:0"):
            v1.placeholder_with_default(0.0, [], name="fed")
        return _input_fn()

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config())
    # MonitoredSession's RuntimeError and words.
    with pytest.raises(RuntimeError, match=r"Same tensor is fed by two hooks\. Conflict\(s\)"):
        estimator.train(input_fn, hooks=[FeedingHook(), FeedingHook()], steps=1)


def test_run_config_checkpoint_intervals_as_the_stock_run_config():
    with pytest.raises(
        ValueError, match="`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both"
    ):
        ipu_run_config.RunConfig(save_checkpoints_steps=0, save_checkpoints_secs=600)
    config = ipu_run_config.RunConfig()
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, 600)
    # Replacing one interval clears the other (tensorflow_estimator run_config.py).
    by_steps = config.replace(save_checkpoints_steps=100)
    assert (by_steps.save_checkpoints_steps, by_steps.save_checkpoints_secs) == (100, None)
    by_secs = by_steps.replace(save_checkpoints_secs=30)
    assert (by_secs.save_checkpoints_steps, by_secs.save_checkpoints_secs) == (None, 30)
    both = config.replace(save_checkpoints_steps=None, save_checkpoints_secs=None)
    assert (both.save_checkpoints_steps, both.save_checkpoints_secs) == (None, None)
    with pytest.raises(ValueError, match="cannot be both set"):
        config.replace(save_checkpoints_steps=1, save_checkpoints_secs=1)
    assert config.replace(experimental_distribute=None).ipu_run_config == config.ipu_run_config
    with pytest.raises(ValueError, match="Replacing master is not supported. Allowed properties"):
        config.replace(master="grpc://x:1")


def test_estimator_trains_with_the_replaced_interval(tmp_path):
    def model_fn(features, labels, mode):
        loss = dense_loss(features, labels)
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    config = _config(2).replace(save_checkpoints_steps=2, model_dir=str(tmp_path))
    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=config)
    estimator.train(_input_fn, steps=4)
    state = v1.train.get_checkpoint_state(str(tmp_path))
    steps = sorted(int(path.split("-")[-1]) for path in state.all_model_checkpoint_paths)
    assert steps == [0, 2, 4]  # at the start, then every 2 steps (not every 600 seconds)


def test_ipu_run_config_is_not_type_checked():
    # ipu_run_config.py's RunConfig keeps whatever it is given: an object with the
    # attributes of an IPURunConfig runs as one.
    duck = types.SimpleNamespace(
        iterations_per_loop=2,
        ipu_options=None,
        num_replicas=1,
        num_shards=1,
        ordinal=0,
        prefetch_depth=None,
    )
    config = ipu_run_config.RunConfig(ipu_run_config=duck)
    assert config.ipu_run_config is duck

    def model_fn(features, labels, mode):
        loss = dense_loss(features, labels)
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=config)
    estimator.train(_input_fn, steps=4)
    assert estimator.get_variable_value("global_step") == 4


def _pipeline_config() -> ipu_run_config.RunConfig:
    options = ipu.config.IPUConfig()
    options.auto_select_ipus = 2
    return ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(
            num_shards=2, iterations_per_loop=2, ipu_options=options
        )
    )


def test_pipeline_spec_checks_only_the_running_modes_hooks():
    features = np.array([1.0, 3.0], np.float32)

    def model_fn(mode, params):
        def stage1(features):
            return v1.get_variable("w", initializer=2.0) * features

        def stage2(partial):
            return partial

        def eval_metrics_fn(partial):
            return {"mean": v1.metrics.mean(partial), "loss": partial}

        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[stage1, stage2],
            eval_metrics_fn=eval_metrics_fn,
            gradient_accumulation_count=2,
            training_hooks=["not a hook"],  # kept as given: evaluation does not run them
            evaluation_hooks=params["evaluation_hooks"],
        )

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(features).batch(1, drop_remainder=True)

    estimator = IPUPipelineEstimator(
        model_fn=model_fn, config=_pipeline_config(), params={"evaluation_hooks": None}
    )
    metrics = estimator.evaluate(input_fn, steps=2)
    assert metrics["mean"] == pytest.approx(np.mean(features * 2.0))
    assert metrics["loss"] == pytest.approx(np.mean(features * 2.0))

    estimator = IPUPipelineEstimator(
        model_fn=model_fn, config=_pipeline_config(), params={"evaluation_hooks": [7]}
    )
    # The stock EstimatorSpec's TypeError, which the original meets once the mode runs.
    with pytest.raises(TypeError, match="All hooks must be SessionRunHook instances, given: 7"):
        estimator.evaluate(input_fn, steps=2)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"save_summary_steps": -1}, "save_summary_steps should be >= 0"),
        ({"keep_checkpoint_every_n_hours": 0}, "keep_checkpoint_every_n_hours should be > 0"),
        ({"log_step_count_steps": 0}, "log_step_count_steps should be > 0"),
        ({"tf_random_seed": 1.5}, "tf_random_seed must be integer."),
        ({"session_config": {}}, "session_config must be instance of ConfigProto"),
        ({"protocol": "http"}, "protocol should be grpc or grpc\\+verbs"),
        ({"device_fn": lambda x: ""}, 'exactly one argument "op"'),
    ],
)
def test_run_config_properties_are_checked_as_the_stock_run_config(settings, message):
    # The IPU RunConfig is tensorflow_estimator's RunConfig, which checks its properties
    # when made and when replaced (run_config.py, _validate_properties).
    with pytest.raises(ValueError, match=message):
        ipu.ipu_run_config.RunConfig(**settings)
    with pytest.raises(ValueError, match=message):
        ipu.ipu_run_config.RunConfig().replace(**settings)
    config = ipu.ipu_run_config.RunConfig(device_fn=lambda op: "/device:CPU:0")
    assert config.device_fn is not None
