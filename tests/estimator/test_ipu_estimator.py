"""`IPUEstimator`, whole programs in the style of the original's ipu_estimator_test.py.

graphcore/tensorflow tensorflow/python/ipu/tests/ipu_estimator_test.py: training counts
`iterations_per_loop` steps per session run, losses are averaged over a loop, evaluation
runs metrics on the IPU or the host, predictions are flattened; here the numbers are also
checked against the same model trained in plain TensorFlow.
"""

from __future__ import annotations

import glob

import numpy as np
import pytest
import tensorflow as tf
from estimator_models import SessionRunCounter, dense_loss, plain_tf_training, regression_data
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_estimator, ipu_run_config
from tensorflow.python.summary import summary_iterator

v1 = tf.compat.v1
TRAIN, EVAL = "train", "eval"


def _config(iterations_per_loop: int = 1, **kwargs) -> ipu_run_config.RunConfig:
    return ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(iterations_per_loop=iterations_per_loop),
        **kwargs,
    )


def _regression_model_fn(features, labels, mode, params):
    loss = dense_loss(features, labels)
    train_op = v1.train.GradientDescentOptimizer(params["learning_rate"]).minimize(loss)
    return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def _regression_input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices(regression_data())
    return dataset.batch(params["batch_size"], drop_remainder=True).repeat()


def _batches(batch_size: int, steps: int):
    x, y = regression_data()
    per_epoch = len(x) // batch_size
    return [
        (
            x[(i % per_epoch) * batch_size : (i % per_epoch + 1) * batch_size],
            y[(i % per_epoch) * batch_size : (i % per_epoch + 1) * batch_size],
        )
        for i in range(steps)
    ]


def _summary_values(directory: str, tag: str) -> list[float]:
    files = glob.glob(directory + "/*tfevents*")
    assert len(files) == 1, files
    return [
        v.simple_value
        for event in summary_iterator.summary_iterator(files[0])
        for v in event.summary.value
        if v.tag == tag
    ]


def test_train_counts_steps_by_loops_and_matches_plain_tensorflow(tmp_path):
    estimator = ipu_estimator.IPUEstimator(
        model_fn=_regression_model_fn,
        model_dir=str(tmp_path),
        config=_config(iterations_per_loop=2, log_step_count_steps=1),
        params={"learning_rate": 0.1},
        train_batch_size=2,
    )
    counter = SessionRunCounter()
    estimator.train(_regression_input_fn, steps=4, hooks=[counter])
    assert counter.num_session_runs == 2
    assert estimator.get_variable_value("global_step") == 4
    # steps are incremental; max_steps is rounded up to the next loop.
    estimator.train(_regression_input_fn, steps=4, hooks=[counter])
    assert (counter.num_session_runs, estimator.get_variable_value("global_step")) == (4, 8)
    estimator.train(_regression_input_fn, max_steps=9, hooks=[counter])
    assert (counter.num_session_runs, estimator.get_variable_value("global_step")) == (5, 10)
    # Already there: nothing runs.
    estimator.train(_regression_input_fn, max_steps=9, hooks=[counter])
    assert counter.num_session_runs == 5
    assert sorted(estimator.get_variable_names()) == ["global_step", "vs/bias", "vs/kernel"]

    # Each train call restarts the input: steps 0-3, 0-3, 0-1 of the data.
    batches = _batches(2, 4) + _batches(2, 4) + _batches(2, 2)
    kernel, bias, _ = plain_tf_training(batches, 0.1)
    np.testing.assert_allclose(estimator.get_variable_value("vs/kernel"), kernel, rtol=1e-5)
    np.testing.assert_allclose(estimator.get_variable_value("vs/bias"), bias, rtol=1e-5)


def test_loss_is_averaged_over_a_loop_in_the_summaries(tmp_path):
    def model_fn(features, labels, mode):
        loss = tf.reduce_sum(features + labels, name="loss")
        return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=tf.identity(loss))

    def input_fn():
        values = tf.data.Dataset.range(10).map(lambda i: tf.fill([1], tf.cast(i, tf.float32)))
        return tf.data.Dataset.zip((values, values)).repeat().batch(2, drop_remainder=True)

    estimator = ipu_estimator.IPUEstimator(
        model_fn=model_fn,
        model_dir=str(tmp_path),
        config=_config(iterations_per_loop=2, log_step_count_steps=1, save_summary_steps=1),
    )
    counter = SessionRunCounter()
    estimator.train(input_fn, steps=6, hooks=[counter])
    assert counter.num_session_runs == 3
    # Batch sums 2, 10, 18, 26, 34, 2: loop means 6, 22, 18 (the original's numbers).
    assert _summary_values(str(tmp_path), "loss") == [6.0, 22.0, 18.0]


def test_evaluate_with_metrics_on_the_ipu():
    def input_fn():
        return tf.data.Dataset.from_tensors(([0.0, 2.0], [1.0, 3.0]))

    def model_fn(features, labels, mode):
        assert mode == EVAL
        loss = tf.reduce_mean(features + labels)
        metrics = {
            "feature_mean": v1.metrics.mean(features),
            "label_mean": v1.metrics.mean(labels),
        }
        return ipu_estimator.IPUEstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config())
    scores = estimator.evaluate(input_fn, steps=1)
    assert scores["feature_mean"] == 1.0
    assert scores["label_mean"] == 2.0
    assert scores["loss"] == 3.0
    assert scores["global_step"] == 0
    assert _summary_values(estimator.eval_dir(), "feature_mean") == [1.0]


@pytest.mark.parametrize("arg_type", [list, dict])
def test_evaluate_with_metrics_on_the_host(arg_type):
    def input_fn():
        features, labels = [0, 0, 0, 1], [0, 1, 0, 1]
        return tf.data.Dataset.from_tensor_slices((features, labels)).batch(2, drop_remainder=True)

    def metrics_fn(features, labels):
        labels64 = tf.cast(labels, np.int64)
        return {
            "accuracy": v1.metrics.accuracy(labels, features),
            "precision": v1.metrics.precision(labels, features),
            "recall": v1.metrics.recall(labels, features),
            "recall_at_1": v1.metrics.recall_at_k(labels64, features, k=1),
            "recall_at_2": v1.metrics.recall_at_k(labels64, features, k=2),
        }

    def model_fn(features, labels, mode):
        args = [features, labels] if arg_type is list else {"labels": labels, "features": features}
        return ipu_estimator.IPUEstimatorSpec(
            mode, loss=tf.constant(0.0), eval_metrics=(metrics_fn, args)
        )

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config())
    scores = estimator.evaluate(input_fn, steps=2, name="host")
    assert scores["accuracy"] == 0.75
    assert scores["precision"] == 1.0
    assert scores["recall"] == 0.5
    assert scores["recall_at_1"] == 0.5
    assert scores["recall_at_2"] == 1.0
    assert estimator.eval_dir("host").endswith("eval_host")


@pytest.mark.parametrize("iterations_per_loop", [1, 2])
def test_global_step_read_in_the_model_is_counted_by_loops(iterations_per_loop):
    def model_fn(features, mode):
        global_step = v1.train.get_global_step()
        metrics = {"mean_global_step": v1.metrics.mean(global_step)}
        return ipu_estimator.IPUEstimatorSpec(
            mode=mode, loss=tf.reduce_sum(features), eval_metric_ops=metrics
        )

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config(iterations_per_loop))
    metrics = estimator.evaluate(lambda: tf.data.Dataset.from_tensor_slices([0, 0, 0, 0]), steps=4)
    sampled = [(i // iterations_per_loop) * iterations_per_loop for i in range(4)]
    assert metrics["mean_global_step"] == np.mean(sampled)


def test_predict_flattens_loops_and_batches():
    features = [[2.0, 3.0], [3.0, 2.0], [3.0, 2.0], [2.0, 3.0], [2.0, 3.0], [3.0, 2.0]]

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(features).batch(2, drop_remainder=True)

    def model_fn(features, mode):
        return ipu_estimator.IPUEstimatorSpec(
            mode,
            predictions={
                "class": tf.argmax(features, axis=-1, output_type=tf.int32),
                "twice": features * 2,
            },
        )

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config(3))
    outputs = estimator.predict(input_fn, num_predictions=6)
    assert [o["class"] for o in outputs] == [1, 0, 0, 1, 1, 0]
    batches = list(
        estimator.predict(
            input_fn, predict_keys=["class"], yield_single_examples=False, num_predictions=3
        )
    )
    assert [b["class"].tolist() for b in batches] == [[1, 0], [0, 1], [1, 0]]
    assert all(set(b) == {"class"} for b in batches)
    everything = list(estimator.predict(input_fn))  # ends with the input
    np.testing.assert_allclose([o["twice"] for o in everything], np.array(features) * 2)


def test_predict_a_tensor_two_per_loop():
    def model_fn(features, labels, mode):
        assert labels is None
        return ipu_estimator.IPUEstimatorSpec(mode, predictions=features)

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config(2))

    def input_fn():
        return tf.data.Dataset.from_tensor_slices([[2.0], [3.0]])

    assert [float(p) for p in estimator.predict(input_fn)] == [2.0, 3.0]
    assert [p.tolist() for p in estimator.predict(input_fn, yield_single_examples=False)] == [
        [2.0],
        [3.0],
    ]


def test_host_call_applies_the_gradients_on_the_host(tmp_path):
    learning_rate = 0.1

    def model_fn(features, labels, mode):
        loss = dense_loss(features, labels)
        optimizer = v1.train.GradientDescentOptimizer(learning_rate)
        variables = v1.trainable_variables()
        grads = [g for g, _ in optimizer.compute_gradients(loss, var_list=variables)]

        def host_fn(*host_gradients):
            return optimizer.apply_gradients(zip(host_gradients, variables, strict=True))

        return ipu_estimator.IPUEstimatorSpec(
            mode=mode, loss=loss, train_op=tf.identity(loss), host_call=(host_fn, grads)
        )

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(regression_data()).batch(4, drop_remainder=True)

    estimator = ipu_estimator.IPUEstimator(
        model_fn=model_fn, model_dir=str(tmp_path), config=_config()
    )
    estimator.train(input_fn, steps=5)
    kernel, bias, _ = plain_tf_training(_batches(4, 5), learning_rate)
    np.testing.assert_allclose(estimator.get_variable_value("vs/kernel"), kernel, rtol=1e-5)
    np.testing.assert_allclose(estimator.get_variable_value("vs/bias"), bias, rtol=1e-5)


def test_host_call_needs_one_iteration_per_loop():
    def model_fn(features, labels, mode):
        loss = tf.reduce_sum(features + labels)
        return ipu_estimator.IPUEstimatorSpec(
            mode=mode, loss=loss, train_op=tf.identity(loss), host_call=(lambda x: x, [loss])
        )

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config(2))
    with pytest.raises(ValueError, match="host_call is not allowed for iterations_per_loop > 1"):
        estimator.train(lambda: tf.data.Dataset.from_tensors(([1.0], [1.0])).repeat(), steps=2)


def test_warm_start_from_another_estimators_model_dir(tmp_path):
    params = {"learning_rate": 0.1}
    first = ipu_estimator.IPUEstimator(
        model_fn=_regression_model_fn,
        model_dir=str(tmp_path / "first"),
        config=_config(2),
        params=params,
        train_batch_size=2,
    )
    first.train(_regression_input_fn, steps=4)
    trained = first.get_variable_value("vs/kernel")

    class Introspect(v1.train.SessionRunHook):
        def begin(self):
            self.kernel = [v for v in v1.trainable_variables() if v.name == "vs/kernel:0"][0]

        def after_create_session(self, session, coord):
            self.value = session.run(self.kernel)

    hook = Introspect()
    second = ipu_estimator.IPUEstimator(
        model_fn=_regression_model_fn,
        model_dir=str(tmp_path / "second"),
        config=_config(2),
        params=params,
        warm_start_from=first.model_dir,
        train_batch_size=2,
    )
    second.train(_regression_input_fn, steps=2, hooks=[hook])
    np.testing.assert_allclose(hook.value, trained)
    # The global step is not warm-started: the second estimator counts from 0.
    assert second.get_variable_value("global_step") == 2


def test_model_must_not_increment_the_global_step():
    def model_fn(features, labels, mode):
        loss = dense_loss(features, labels)
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=v1.train.get_global_step()
        )
        return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config())
    with pytest.raises(ValueError, match="Illegal increment of the `global_step` variable"):
        estimator.train(
            lambda: tf.data.Dataset.from_tensor_slices(regression_data()).batch(2, True), steps=1
        )


def test_bad_arguments_are_refused_as_the_original():
    def model_fn(features, labels, mode):
        return None

    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config(3))
    with pytest.raises(
        ValueError, match=r"steps \(1\) must be a multiple of iterations_per_loop \(3\)"
    ):
        estimator.train(input_fn=lambda: None, steps=1)
    with pytest.raises(ValueError, match="must be a multiple of iterations_per_loop"):
        estimator.evaluate(input_fn=lambda: None, steps=2)
    with pytest.raises(ValueError, match="`config` must be provided with type"):
        ipu_estimator.IPUEstimator(model_fn=model_fn, config=None)
    with pytest.raises(ValueError, match="must include features argument"):
        ipu_estimator.IPUEstimator(model_fn=lambda labels: None, config=_config())
    with pytest.raises(ValueError, match="reserved keys"):
        ipu_estimator.IPUEstimator(
            model_fn=lambda features, params: None, config=_config(), params={"input_fn": 1}
        )
    with pytest.raises(ValueError, match=r"train_batch_size \(got 3\) must be divisible"):
        ipu_estimator.IPUEstimator(
            model_fn=model_fn,
            config=ipu_run_config.RunConfig(
                ipu_run_config=ipu_run_config.IPURunConfig(num_replicas=2, ipu_options=_ipus(2))
            ),
            train_batch_size=3,
        )
    with pytest.raises(ValueError, match="input_fn must return Dataset"):
        ipu_estimator.IPUEstimator(model_fn=model_fn, config=_config(1)).train(
            lambda: [1.0], steps=1
        )

    def both_metrics(features, labels, mode):
        return ipu_estimator.IPUEstimatorSpec(
            mode,
            loss=tf.constant(0.0),
            eval_metric_ops={"m": v1.metrics.mean(features)},
            eval_metrics=(lambda f: {"m": v1.metrics.mean(f)}, [features]),
        )

    with pytest.raises(ValueError, match="cannot contain both eval_metric_ops and eval_metrics"):
        ipu_estimator.IPUEstimator(model_fn=both_metrics, config=_config()).evaluate(
            lambda: tf.data.Dataset.from_tensors(([1.0], [1.0])), steps=1
        )
    with pytest.raises(TypeError, match="second element in `eval_metrics` must be a list or dict"):
        ipu_estimator.IPUEstimatorSpec(EVAL, loss=tf.constant(0.0), eval_metrics=(len, 1))
    with pytest.raises(ValueError, match="Missing train_op"):
        ipu_estimator.IPUEstimatorSpec(TRAIN, loss=tf.constant(0.0))


def _ipus(count: int) -> ipu.config.IPUConfig:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = count
    return config


def test_ipu_run_config_and_run_config_checks():
    with pytest.raises(ValueError, match="configuration requires more than one device"):
        ipu_run_config.IPURunConfig(num_replicas=2)
    with pytest.raises(
        ValueError, match=r"configured with 4 devices \(2 replicas times 2 shards\)"
    ):
        ipu_run_config.IPURunConfig(num_replicas=2, num_shards=2, ipu_options=_ipus(2))
    with pytest.raises(ValueError, match="Only 1 device\\(s\\) available"):
        ipu_run_config.IPURunConfig(ordinal=1, ipu_options=_ipus(1))
    with pytest.raises(TypeError, match="ipu_options must be an IPUConfig instance"):
        ipu_run_config.IPURunConfig(ipu_options={"auto_select_ipus": 1})
    config = ipu_run_config.IPURunConfig(num_replicas=2, num_shards=2, ipu_options=_ipus(4))
    assert (config.num_replicas, config.num_shards, config.iterations_per_loop) == (2, 2, 1)

    run_config = ipu_run_config.RunConfig(ipu_run_config=config, master="grpc://host:1")
    assert run_config.ipu_run_config is config and run_config.master == "grpc://host:1"
    assert run_config.save_checkpoints_secs == 600 and run_config.save_checkpoints_steps is None
    assert run_config.keep_checkpoint_max == 5 and run_config.save_summary_steps == 100
    # The stock RunConfig's message.
    with pytest.raises(ValueError, match="`save_checkpoints_steps` and `save_checkpoints_secs`"):
        ipu_run_config.RunConfig(save_checkpoints_steps=1, save_checkpoints_secs=1)
    assert ipu_run_config.RunConfig().ipu_run_config == ipu_run_config.IPURunConfig()


def test_run_config_reads_tf_config(monkeypatch):
    cluster = {
        "chief": ["host0:2222"],
        "ps": ["host1:2222", "host2:2222"],
        "worker": ["host3:2222", "host4:2222", "host5:2222"],
    }
    import json

    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}})
    )
    config = ipu_run_config.RunConfig()
    assert config.master == "grpc://host4:2222"
    assert (config.task_id, config.task_type, config.is_chief) == (1, "worker", False)
    assert (config.num_ps_replicas, config.num_worker_replicas) == (2, 4)
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})
    )
    assert ipu_run_config.RunConfig().is_chief


def test_constructor_keeps_model_dir_and_config():
    config = ipu_run_config.RunConfig()
    estimator = ipu_estimator.IPUEstimator(
        model_fn=lambda features, labels, params: None, model_dir="bla", config=config
    )
    assert estimator.model_dir == "bla"
    assert isinstance(estimator.config, ipu_run_config.RunConfig)
    assert estimator.config.model_dir == "bla"
    assert estimator.latest_checkpoint() is None
    with pytest.raises(ValueError, match="Could not find trained model in model_dir"):
        estimator.get_variable_value("global_step")


def test_invalid_prefetch_depth_is_the_infeeds_error():
    def model_fn(features, labels, mode):
        del features, labels, mode

    estimator = ipu_estimator.IPUEstimator(
        model_fn=model_fn,
        config=ipu_run_config.RunConfig(
            ipu_run_config=ipu_run_config.IPURunConfig(prefetch_depth=-1)
        ),
    )
    with pytest.raises(ValueError, match="prefetch_depth must be greater than zero"):
        estimator.train(lambda: tf.data.Dataset.from_tensor_slices(([1.0], [0.0])), steps=1)


class _TwoWorkers:
    """What the estimator reads of a distribution strategy: its replicas in sync."""

    num_replicas_in_sync = 2


def test_distribution_needs_one_iteration_per_loop_and_divides_batch_sizes():
    config = ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(iterations_per_loop=2),
        train_distribute=_TwoWorkers(),
    )
    with pytest.raises(
        NotImplementedError,
        match=r"iterations_per_loop > 1 \(got 2\) not supported with distribution",
    ):
        ipu_estimator.IPUEstimator(model_fn=_regression_model_fn, config=config, params={})
    config = ipu_run_config.RunConfig(train_distribute=_TwoWorkers())
    with pytest.raises(
        ValueError, match=r"must be divisible by num_workers \* num_replicas \(2 \* 1\)"
    ):
        ipu_estimator.IPUEstimator(
            model_fn=_regression_model_fn, config=config, params={}, train_batch_size=3
        )
