"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/ipu_estimator_test.py`.

`IPUEstimator` on TF1 graphs: training runs `iterations_per_loop` steps per session run,
losses are averaged over a loop, host calls run on the host, evaluation runs metrics on
the IPU or the host, predictions are flattened, batch sizes reach `params`. TensorFlow 2.21
has no `tf.estimator`: where the original also runs the stock `Estimator` or returns the
stock `EstimatorSpec`, these tests run the `IPUEstimator` with `IPUEstimatorSpec`.

One difference is by design: operations built for an emulated IPU are placed on its host
device (`/device:CPU:0`), so the original's checks that the model_fn's operations are on
`/device:IPU:0` are left out of the host-call scenarios (the host call's own variables are
on `/device:CPU:0`, as there).
"""

from __future__ import annotations

import glob

import in_process_cluster
import numpy as np
import pytest
import tensorflow as tf
from session_hooks import SessionRunCounter
from tensorflow.python import ipu
from tensorflow.python.distribute.distribute_config import DistributeConfig
from tensorflow.python.ipu import ipu_estimator, ipu_run_config
from tensorflow.python.ipu import test_utils as tu
from tensorflow.python.ipu.ipu_multi_worker_strategy import IPUMultiWorkerStrategyV1
from tensorflow.python.summary import summary_iterator

v1 = tf.compat.v1
Spec = ipu_estimator.IPUEstimatorSpec
TRAIN, PREDICT = "train", "infer"


@pytest.fixture(autouse=True)
def unconfigured_system():
    # An estimator configures the system from its ipu_options: no test inherits another's.
    yield
    ipu.config.reset_ipu_configuration()


def _dummy_model_fn(features, labels, params):
    _, _, _ = features, labels, params


def _create_regression_dataset(num_samples, num_features):
    np.random.seed(1234)
    target_weights = np.random.rand(num_features, 1).astype(np.float32)
    x = np.random.rand(num_samples, num_features).astype(np.float32)
    return x, np.matmul(x, target_weights)


def _config(iterations_per_loop=1, **run_config):
    return ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(iterations_per_loop=iterations_per_loop),
        **run_config,
    )


def _estimator(model_fn, tmp_path, config=None, **kwargs):
    return ipu_estimator.IPUEstimator(
        model_fn=model_fn,
        config=config or ipu_run_config.RunConfig(),
        model_dir=str(tmp_path),
        **kwargs,
    )


def _dense_regression_model_fn(features, labels, mode):
    with v1.variable_scope("vs", use_resource=True):
        predictions = tf.keras.layers.Dense(units=1)(features)
    loss = v1.losses.mean_squared_error(labels=labels, predictions=predictions)
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return Spec(mode=mode, loss=loss, train_op=train_op)


def _sum_model_fn(features, labels, mode):
    loss = tf.reduce_sum(features + labels, name="loss")
    return Spec(mode=mode, loss=loss, train_op=tf.identity(loss))


def _increasing(batch_size):
    dataset = tu.create_dual_increasing_dataset(10, data_shape=[1], label_shape=[1])
    return dataset.batch(batch_size=batch_size, drop_remainder=True)


def _losses_in_events(model_dir):
    (events_file,) = glob.glob(model_dir + "/*tfevents*")
    return [
        v.simple_value
        for e in summary_iterator.summary_iterator(events_file)
        for v in e.summary.value
        if "loss" in v.tag
    ]


@pytest.mark.follows("testConstructor")
def test_constructor():
    estimator = ipu_estimator.IPUEstimator(
        model_fn=_dummy_model_fn, model_dir="bla", config=ipu_run_config.RunConfig()
    )
    assert estimator.model_dir == "bla"
    assert isinstance(estimator.config, ipu_run_config.RunConfig)


@pytest.mark.follows("testTrain")
@pytest.mark.parametrize("dataset_class", [tf.compat.v1.data.Dataset, tf.data.Dataset])
def test_train(tmp_path, dataset_class):
    def my_model_fn(features, labels, mode, params):
        assert mode == TRAIN and params["batch_size"] == 2
        return _dense_regression_model_fn(features, labels, mode)

    def my_input_fn(params):
        dataset = dataset_class.from_tensor_slices(_create_regression_dataset(1000, 5))
        return dataset.batch(batch_size=params["batch_size"], drop_remainder=True).repeat()

    estimator = _estimator(
        my_model_fn, tmp_path, _config(2, log_step_count_steps=1), train_batch_size=2
    )
    counter = SessionRunCounter()
    estimator.train(input_fn=my_input_fn, steps=4, hooks=[counter])
    assert (counter.num_session_runs, estimator.get_variable_value("global_step")) == (2, 4)
    estimator.train(input_fn=my_input_fn, steps=4, hooks=[counter])
    assert (counter.num_session_runs, estimator.get_variable_value("global_step")) == (4, 8)
    # The number of steps is rounded up to the next multiple of `iterations_per_loop`.
    estimator.train(input_fn=my_input_fn, max_steps=9, hooks=[counter])
    assert (counter.num_session_runs, estimator.get_variable_value("global_step")) == (5, 10)


@pytest.mark.follows("testPassingParams")
def test_passing_params(tmp_path):
    def my_input_fn(mode, params):
        assert mode == TRAIN and params["my_param"] == 42
        return _increasing(1)

    def my_model_fn(features, labels, mode, params):
        assert mode == TRAIN and params["my_param"] == 42
        return _sum_model_fn(features, labels, mode)

    estimator = _estimator(my_model_fn, tmp_path, params={"my_param": 42})
    estimator.train(input_fn=my_input_fn, steps=1)
    assert estimator.params["my_param"] == 42


def _host_call_estimator(tmp_path, host_fn, host_args, train_op=None):
    def my_model_fn(features, labels, mode):
        loss = features + labels
        return Spec(
            mode=mode,
            loss=loss,
            train_op=train_op() if train_op else tf.identity(loss),
            host_call=(host_fn, host_args(features, labels, loss)),
        )

    return _estimator(my_model_fn, tmp_path)


def _ones_and_zero_one():
    return tf.data.Dataset.from_tensor_slices(([1.0, 1.0], [0.0, 1.0]))


@pytest.mark.follows("testHostCallOneArgument")
def test_host_call_one_argument(tmp_path):
    def my_host_fn(loss):
        loss_sum = v1.get_variable(name="loss_sum", initializer=0.0)
        assert loss_sum.device == "/device:CPU:0"
        return loss_sum.assign_add(loss)

    estimator = _host_call_estimator(tmp_path, my_host_fn, lambda features, labels, loss: [loss])
    estimator.train(input_fn=_ones_and_zero_one, steps=2)
    assert estimator.get_variable_value("loss_sum") == 3.0


@pytest.mark.follows("testHostCallZeroArguments")
def test_host_call_zero_arguments(tmp_path):
    def my_host_fn():
        return v1.get_variable(name="host_counter", initializer=0.0).assign_add(1.0)

    def ipu_counter():
        return v1.get_variable(name="ipu_counter", initializer=0.0).assign_add(1.0)

    estimator = _host_call_estimator(
        tmp_path, my_host_fn, lambda features, labels, loss: [], ipu_counter
    )
    estimator.train(input_fn=_ones_and_zero_one, steps=2)
    assert estimator.get_variable_value("host_counter") == 2.0
    assert estimator.get_variable_value("ipu_counter") == 2.0


@pytest.mark.follows("testHostCallNotReturningAnything")
def test_host_call_not_returning_anything(tmp_path):
    estimator = _host_call_estimator(tmp_path, lambda: None, lambda features, labels, loss: [])
    with pytest.raises(TypeError, match="`host_call` return value must be Operation or Tensor"):
        estimator.train(input_fn=_ones_and_zero_one, steps=1)


@pytest.mark.follows("testHostCallMultipleIterationsPerLoopNotAllowed")
def test_host_call_multiple_iterations_per_loop_not_allowed(tmp_path):
    def my_model_fn(features, labels, mode):
        loss = features + labels
        return Spec(mode=mode, loss=loss, train_op=tf.identity(loss), host_call=(lambda: None, []))

    estimator = _estimator(my_model_fn, tmp_path, _config(2))
    with pytest.raises(ValueError, match="host_call is not allowed for iterations_per_loop > 1"):
        estimator.train(input_fn=lambda: tf.data.Dataset.from_tensor_slices(([], [])), steps=2)


@pytest.mark.follows("testHostCallTwoArguments")
def test_host_call_two_arguments(tmp_path):
    def my_host_fn(features, labels):
        feature_sum = v1.get_variable(name="feature_sum", initializer=0.0)
        label_sum = v1.get_variable(name="label_sum", initializer=0.0)
        return tf.group([feature_sum.assign_add(features), label_sum.assign_add(labels)])

    estimator = _host_call_estimator(
        tmp_path, my_host_fn, lambda features, labels, loss: [features, labels]
    )
    estimator.train(input_fn=_ones_and_zero_one, steps=2)
    assert estimator.get_variable_value("feature_sum") == 2.0
    assert estimator.get_variable_value("label_sum") == 1.0


@pytest.mark.follows("testModelFnDoesNotTakeLabels")
def test_model_fn_does_not_take_labels(tmp_path):
    def my_model_fn(features, mode):
        loss = tf.reduce_sum(features, name="loss")
        return Spec(mode=mode, loss=loss, train_op=tf.identity(loss))

    estimator = _estimator(my_model_fn, tmp_path)
    with pytest.raises(ValueError, match="model_fn does not take labels"):
        estimator.train(input_fn=lambda: _increasing(1), steps=1)


@pytest.mark.follows("testNotPassingDataset")
def test_not_passing_dataset(tmp_path):
    estimator = _estimator(_sum_model_fn, tmp_path)
    with pytest.raises(ValueError, match="must return Dataset"):
        estimator.train(input_fn=lambda: (1, 2), steps=1)


@pytest.mark.follows("testVerifyTrainFeeds")
def test_verify_train_feeds(tmp_path):
    config = _config(1, log_step_count_steps=1, save_summary_steps=1)
    estimator = _estimator(_sum_model_fn, tmp_path, config)
    counter = SessionRunCounter()
    estimator.train(input_fn=lambda: _increasing(1), steps=6, hooks=[counter])
    assert counter.num_session_runs == 6
    assert _losses_in_events(estimator.model_dir) == list(np.arange(0.0, 12.0, 2.0))


@pytest.mark.follows("testTrainWithWarmStart")
def test_train_with_warm_start(tmp_path):
    class IntrospectionHook(v1.train.SessionRunHook):
        def begin(self):
            self.variables = v1.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES, scope=".*")

        def after_create_session(self, session, coord):
            self.result = dict(
                zip([v.name[:-2] for v in self.variables], session.run(self.variables), strict=True)
            )

    def my_input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(_create_regression_dataset(1000, 5))
        return dataset.batch(batch_size=2, drop_remainder=True).repeat()

    config = _config(2, log_step_count_steps=1)
    estimator = _estimator(_dense_regression_model_fn, tmp_path / "first", config)
    estimator.train(input_fn=my_input_fn, steps=4)
    trained = {
        n: estimator.get_variable_value(n) for n in estimator.get_variable_names() if "vs" in n
    }
    warm = _estimator(
        _dense_regression_model_fn, tmp_path / "second", config, warm_start_from=estimator.model_dir
    )
    introspection = IntrospectionHook()
    warm.train(input_fn=my_input_fn, steps=4, hooks=[introspection])
    assert set(trained) == set(introspection.result)
    for name, value in trained.items():
        np.testing.assert_array_equal(value[0], introspection.result[name][0])


@pytest.mark.follows("testLossAveraging")
def test_loss_averaging(tmp_path):
    config = _config(2, log_step_count_steps=1, save_summary_steps=1)
    estimator = _estimator(_sum_model_fn, tmp_path, config)
    counter = SessionRunCounter()
    estimator.train(input_fn=lambda: _increasing(2), steps=6, hooks=[counter])
    assert counter.num_session_runs == 3
    assert _losses_in_events(estimator.model_dir) == [6.0, 22.0, 18.0]


@pytest.mark.follows("testEvaluate")
def test_evaluate(tmp_path):
    def my_input_fn():
        return tf.data.Dataset.from_tensors(([0.0, 2.0], [1.0, 3.0]))  # means 1 and 2

    def my_model_fn(features, labels, mode):
        loss = tf.reduce_mean(features + labels)
        metrics = {
            "feature_mean": v1.metrics.mean(features),
            "label_mean": v1.metrics.mean(labels),
        }
        return Spec(mode, loss=loss, eval_metric_ops=metrics)

    scores = _estimator(my_model_fn, tmp_path, _config(1)).evaluate(my_input_fn, steps=1)
    assert (scores["feature_mean"], scores["label_mean"], scores["loss"]) == (1.0, 2.0, 3.0)


def _classification_metrics(labels, features):
    return {
        "accuracy": v1.metrics.accuracy(labels, features),
        "precision": v1.metrics.precision(labels, features),
        "recall": v1.metrics.recall(labels, features),
    }


@pytest.mark.follows("testEvaluateBinaryClassificationMetrics")
def test_evaluate_binary_classification_metrics(tmp_path):
    def my_model_fn(features, labels, mode):
        return Spec(
            mode,
            loss=tf.constant(0.0),
            eval_metric_ops=_classification_metrics(labels, features),
        )

    estimator = _estimator(my_model_fn, tmp_path, _config(1))
    scores = estimator.evaluate(
        lambda: tf.data.Dataset.from_tensor_slices(([0, 0, 0, 1], [0, 1, 0, 1])), steps=4
    )
    assert (scores["accuracy"], scores["precision"], scores["recall"]) == (0.75, 1.0, 0.5)


@pytest.mark.follows("testEvaluateMissingEvalMetrics")
def test_evaluate_missing_eval_metrics(tmp_path):
    def my_model_fn(features, labels, mode):
        return Spec(mode, loss=tf.reduce_mean(features + labels))

    estimator = _estimator(my_model_fn, tmp_path)
    with pytest.raises(ValueError, match="must contain either eval_metric_ops or eval_metrics"):
        estimator.evaluate(lambda: tf.data.Dataset.from_tensors(([], [])), steps=1)


@pytest.mark.follows("testEvaluateCannotProvideBothEvalMetrics")
def test_evaluate_cannot_provide_both_eval_metrics(tmp_path):
    def my_model_fn(features, labels, mode):
        return Spec(
            mode,
            loss=tf.reduce_mean(features + labels),
            eval_metric_ops={"accuracy": v1.metrics.accuracy(labels, features)},
            eval_metrics=(lambda: None, []),
        )

    estimator = _estimator(my_model_fn, tmp_path)
    with pytest.raises(ValueError, match="cannot contain both eval_metric_ops and eval_metrics"):
        estimator.evaluate(lambda: tf.data.Dataset.from_tensors(([], [])), steps=1)


@pytest.mark.follows("testEvaluateOnHost")
@pytest.mark.parametrize("arg_type", [list, dict])
def test_evaluate_on_host(tmp_path, arg_type):
    def my_metrics_fn(features, labels):
        labels64 = tf.cast(labels, np.int64)
        return {
            **_classification_metrics(labels, features),
            "recall_at_1": v1.metrics.recall_at_k(labels64, features, k=1),
            "recall_at_2": v1.metrics.recall_at_k(labels64, features, k=2),
        }

    def my_model_fn(features, labels, mode):
        # A dict passes in reverse order: the arguments go by name.
        args = [features, labels] if arg_type is list else {"labels": labels, "features": features}
        return Spec(mode, loss=tf.constant(0.0), eval_metrics=(my_metrics_fn, args))

    def my_input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(([0, 0, 0, 1], [0, 1, 0, 1]))
        return dataset.batch(2, drop_remainder=True)

    scores = _estimator(my_model_fn, tmp_path, _config(1)).evaluate(my_input_fn, steps=2)
    assert [scores[k] for k in ("accuracy", "precision", "recall")] == [0.75, 1.0, 0.5]
    assert (scores["recall_at_1"], scores["recall_at_2"]) == (0.5, 1.0)


@pytest.mark.follows("testEvaluateOnHostWithWrongArgumentType")
def test_evaluate_on_host_with_wrong_argument_type(tmp_path):
    def my_model_fn(features, labels, mode):
        loss = tf.constant(0.0)
        return Spec(mode, loss=loss, eval_metrics=(lambda: None, loss))

    estimator = _estimator(my_model_fn, tmp_path)
    with pytest.raises(TypeError, match="second element in `eval_metrics` must be a list or dict"):
        estimator.evaluate(lambda: tf.data.Dataset.from_tensor_slices([]), steps=1)


@pytest.mark.follows("testPredictTensorTwoPerIteration")
def test_predict_tensor_two_per_iteration(tmp_path):
    def my_model_fn(features, labels, mode):
        assert labels is None
        return Spec(mode, predictions=features)

    estimator = _estimator(my_model_fn, tmp_path, _config(2))

    def my_input_fn():
        return tf.data.Dataset.from_tensor_slices([[2.0], [3.0]])

    outputs = estimator.predict(input_fn=my_input_fn, yield_single_examples=True)
    assert (next(outputs), next(outputs)) == (2.0, 3.0)
    outputs = estimator.predict(input_fn=my_input_fn, yield_single_examples=False)
    assert (list(next(outputs)), list(next(outputs))) == ([2.0], [3.0])


@pytest.mark.follows("testPredictDictOnePerIteration")
def test_predict_dict_one_per_iteration(tmp_path):
    def my_model_fn(features, mode):
        return Spec(mode, predictions={"features": features, "features2": features + features})

    estimator = _estimator(my_model_fn, tmp_path, _config(1))

    def my_input_fn():
        return tf.data.Dataset.from_tensors([2.0])

    (output,) = list(estimator.predict(input_fn=my_input_fn, num_predictions=1))
    assert (output["features"], output["features2"]) == (2.0, 4.0)
    (output,) = list(
        estimator.predict(input_fn=my_input_fn, predict_keys=["features"], num_predictions=1)
    )
    assert output["features"] == 2.0 and "labels" not in output and "features2" not in output


def _argmax_batches():
    features = [[2.0, 3.0], [3.0, 2.0], [3.0, 2.0], [2.0, 3.0], [2.0, 3.0], [3.0, 2.0]]
    return tf.data.Dataset.from_tensor_slices(features).batch(2, drop_remainder=True)


def _check_flattened_predictions(estimator, key):
    def get(value):
        return np.asarray(value if key is None else value[key]).tolist()

    outputs = estimator.predict(
        input_fn=_argmax_batches, yield_single_examples=True, num_predictions=6
    )
    assert [get(next(outputs)) for _ in range(6)] == [1, 0, 0, 1, 1, 0]
    with pytest.raises(StopIteration):
        next(outputs)
    outputs = estimator.predict(
        input_fn=_argmax_batches, yield_single_examples=False, num_predictions=3
    )
    assert [get(next(outputs)) for _ in range(3)] == [[1, 0], [0, 1], [1, 0]]
    with pytest.raises(StopIteration):
        next(outputs)


@pytest.mark.follows("testPredictTensorBatchShouldGiveFlattenedOutput")
def test_predict_tensor_batch_should_give_flattened_output(tmp_path):
    def my_model_fn(features, mode):
        return Spec(mode, predictions=tf.argmax(features, axis=-1, output_type=tf.int32))

    _check_flattened_predictions(_estimator(my_model_fn, tmp_path, _config(3)), None)


@pytest.mark.follows("testPredictDictBatchShouldGiveFlattenedOutput")
def test_predict_dict_batch_should_give_flattened_output(tmp_path):
    def my_model_fn(features, mode):
        predictions = {"predictions": tf.argmax(features, axis=-1, output_type=tf.int32)}
        return Spec(mode, predictions=predictions)

    _check_flattened_predictions(_estimator(my_model_fn, tmp_path, _config(3)), "predictions")


@pytest.mark.follows("testStepsMustBeMultipleOfIterationsPerLoop")
def test_steps_must_be_multiple_of_iterations_per_loop(tmp_path):
    estimator = _estimator(_dummy_model_fn, tmp_path, _config(3))
    with pytest.raises(ValueError, match="must be a multiple of iterations_per_loop"):
        estimator.train(input_fn=lambda: None, steps=1)
    with pytest.raises(ValueError, match="must be a multiple of iterations_per_loop"):
        estimator.evaluate(input_fn=lambda: None, steps=2)


def _options(**values):
    options = ipu.config.IPUConfig()
    for name, value in values.items():
        setattr(options, name, value)
    return options


@pytest.mark.follows("testIPURunConfig")
def test_ipu_run_config():
    run_config = ipu_run_config.IPURunConfig
    for kwargs in ({"num_replicas": 3}, {"num_shards": 2}):
        with pytest.raises(ValueError, match="configuration requires more than one device"):
            run_config(iterations_per_loop=2, ipu_options=None, **kwargs)
    for kwargs in ({"num_replicas": 1}, {"num_shards": 1}):
        assert isinstance(run_config(iterations_per_loop=2, ipu_options=None, **kwargs), run_config)
    assert isinstance(
        run_config(iterations_per_loop=2, ipu_options=_options(auto_select_ipus=1)), run_config
    )
    with pytest.raises(ValueError, match="`IpuOptions` configured with"):
        run_config(iterations_per_loop=2, ipu_options=_options(auto_select_ipus=3))
    with pytest.raises(
        ValueError,
        match=r"`IPURunConfig` configured with 4 devices \(4 replicas times 1 shards\), "
        r"but `IpuOptions` configured with 3 devices",
    ):
        run_config(iterations_per_loop=2, num_replicas=4, ipu_options=_options(auto_select_ipus=3))
    with pytest.raises(
        ValueError,
        match=r"`IPURunConfig` configured with 4 devices \(4 replicas times 1 shards\), "
        r"but `IpuOptions` configured with 1 devices",
    ):
        run_config(
            iterations_per_loop=2,
            num_replicas=4,
            ipu_options=_options(auto_select_ipus=[4, 1]),
            ordinal=1,
        )
    accepted = [
        {"num_replicas": 4, "ipu_options": _options(auto_select_ipus=[2, 4]), "ordinal": 1},
        {"num_replicas": 4, "ipu_options": _options(auto_select_ipus=4)},
        {"num_replicas": 2, "num_shards": 2, "ipu_options": _options(auto_select_ipus=4)},
        {"num_shards": 4, "ipu_options": _options(select_ipus=[0, 1, 2, 3])},
        {"num_replicas": 2, "num_shards": 2, "ipu_options": _options(select_ipus=[0, 1, 2, 3])},
        {"num_replicas": 1, "num_shards": 1, "ipu_options": _options(select_ipus=[0])},
    ]
    for kwargs in accepted:
        assert isinstance(run_config(iterations_per_loop=2, **kwargs), run_config)


@pytest.mark.follows("testDatasetWithDicts")
def test_dataset_with_dicts(tmp_path):
    def my_input_fn():
        features = {"x0": np.array([[1.0]], np.float32), "x1": np.array([[2.0]], np.float32)}
        labels = {"y0": np.array([[3.0]], np.float32), "y1": np.array([[4.0]], np.float32)}
        dataset = tf.data.Dataset.from_tensor_slices((features, labels))
        return dataset.batch(1, drop_remainder=True)

    def my_model_fn(features, labels, mode):
        if mode == PREDICT:
            assert labels is None
            loss = tf.reduce_sum(features["x0"] + features["x1"], axis=-1)
        else:
            total = features["x0"] + features["x1"] + labels["y0"] + labels["y1"]
            loss = tf.reduce_sum(total, axis=-1)
        return Spec(
            mode=mode,
            loss=loss,
            train_op=tf.identity(loss),
            predictions=loss,
            eval_metric_ops={"mean_loss": v1.metrics.mean(loss)},
        )

    estimator = _estimator(my_model_fn, tmp_path)
    estimator.train(input_fn=my_input_fn, steps=1)
    assert next(estimator.predict(input_fn=my_input_fn, yield_single_examples=True)) == 3.0
    np.testing.assert_allclose(estimator.evaluate(my_input_fn, steps=1)["loss"], 10.0)


@pytest.mark.follows("testFlatDatasetWithDict")
def test_flat_dataset_with_dict(tmp_path):
    def my_input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(
            {"input_ids": [[0], [1]], "input_mask": [[2], [3]], "labels": [[4], [5]]}
        )
        return dataset.batch(1, drop_remainder=True)

    def my_model_fn(features, mode):
        total = features["input_ids"] + features["input_mask"] + features["labels"]
        loss = tf.reduce_sum(total, axis=-1)
        return Spec(
            mode=mode,
            loss=loss,
            train_op=tf.identity(loss),
            predictions=loss,
            eval_metric_ops={"mean_loss": v1.metrics.mean(loss)},
        )

    estimator = _estimator(my_model_fn, tmp_path)
    estimator.train(input_fn=my_input_fn, steps=2)
    predictions = estimator.predict(input_fn=my_input_fn)
    assert (next(predictions), next(predictions)) == (6.0, 9.0)
    assert estimator.evaluate(my_input_fn, steps=2)["loss"] == 7.5


@pytest.mark.follows("testTupleDatasetWithWrongNumberOfElements")
def test_tuple_dataset_with_wrong_number_of_elements(tmp_path):
    def one_element():
        return tf.data.Dataset.from_tensor_slices(([[0], [1]],)).batch(1, drop_remainder=True)

    def three_elements():
        dataset = tf.data.Dataset.from_tensor_slices(([[0], [1]], [[2], [3]], [[4], [5]]))
        return dataset.batch(1, drop_remainder=True)

    def my_model_fn(features, labels, mode):
        loss = tf.reduce_sum(features + labels, axis=-1)
        return Spec(mode=mode, loss=loss, train_op=tf.identity(loss))

    estimator = _estimator(my_model_fn, tmp_path)
    for input_fn in (one_element, three_elements):
        with pytest.raises(
            ValueError, match=r"input_fn should return \(features, labels\) as a len 2 tuple."
        ):
            estimator.train(input_fn=input_fn, steps=1)


@pytest.mark.follows("testPassingHooksFromModelFunction")
def test_passing_hooks_from_model_function(tmp_path):
    training_hook, evaluation_hook, prediction_hook = (SessionRunCounter() for _ in range(3))

    def my_input_fn():
        features, labels = np.array([[1.0]], np.float32), np.array([[2.0]], np.float32)
        return tf.data.Dataset.from_tensor_slices((features, labels)).batch(1, True)

    def my_model_fn(features, labels, mode):
        loss = features if mode == PREDICT else features + labels
        return Spec(
            mode=mode,
            loss=loss,
            train_op=tf.identity(loss),
            predictions=loss,
            eval_metric_ops={"mean_loss": v1.metrics.mean(loss)},
            training_hooks=[training_hook],
            evaluation_hooks=[evaluation_hook],
            prediction_hooks=[prediction_hook],
        )

    estimator = _estimator(my_model_fn, tmp_path)
    estimator.train(input_fn=my_input_fn, steps=1)
    assert training_hook.num_session_runs == 1
    predictions = estimator.predict(input_fn=my_input_fn)
    assert prediction_hook.num_session_runs == 0  # not before the generator is consumed
    next(predictions)
    assert prediction_hook.num_session_runs == 1
    del predictions
    estimator.evaluate(my_input_fn, steps=1)
    assert evaluation_hook.num_session_runs == 1


@pytest.mark.follows("testIncrementingGlobalStepInModelFunctionShouldRaiseError")
@pytest.mark.parametrize("iterations_per_loop", [1, 2])
def test_incrementing_global_step_in_model_function_should_raise_error(
    tmp_path, iterations_per_loop
):
    def my_model_fn(features, labels, mode):
        predictions = tf.keras.layers.Dense(units=1)(features)
        loss = v1.losses.mean_squared_error(labels=labels, predictions=predictions)
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=v1.train.get_global_step()
        )
        return Spec(mode=mode, loss=loss, train_op=train_op)

    def my_input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(_create_regression_dataset(2, 5))
        return dataset.batch(batch_size=1, drop_remainder=True).repeat()

    estimator = _estimator(my_model_fn, tmp_path, _config(iterations_per_loop))
    with pytest.raises(
        ValueError, match="Illegal increment of the `global_step` variable in the `model_fn`"
    ):
        estimator.train(input_fn=my_input_fn, steps=iterations_per_loop)


@pytest.mark.follows("testReadGlobalStepInModelFunction")
@pytest.mark.parametrize("iterations_per_loop", [1, 2])
def test_read_global_step_in_model_function(tmp_path, iterations_per_loop):
    def my_model_fn(features, mode):
        global_step = v1.train.get_global_step()
        return Spec(
            mode=mode,
            loss=tf.reduce_sum(features),
            eval_metric_ops={"mean_global_step": v1.metrics.mean(global_step)},
        )

    estimator = _estimator(my_model_fn, tmp_path, _config(iterations_per_loop))
    metrics = estimator.evaluate(
        input_fn=lambda: tf.data.Dataset.from_tensor_slices([0, 0, 0, 0]), steps=4
    )
    # The global step is incremented on the host after each loop: its resolution is
    # `iterations_per_loop`.
    sampled = [(i // iterations_per_loop) * iterations_per_loop for i in range(4)]
    assert metrics["mean_global_step"] == np.mean(sampled)


@pytest.mark.follows("testPredictWithFeatureColumns")
def test_predict_with_feature_columns(tmp_path):
    feature_column = tf.compat.v1.feature_column

    def my_input_fn():
        age = feature_column.numeric_column("age")
        age_buckets = feature_column.bucketized_column(age, boundaries=[20, 40, 60])
        direction = feature_column.categorical_column_with_vocabulary_list(
            "direction", ["north", "east", "south", "west"]
        )
        embedding = feature_column.embedding_column(
            direction, dimension=4, initializer=v1.initializers.identity()
        )
        dataset = tf.data.Dataset.from_tensor_slices(
            {
                "age": [[18], [25], [55], [90]],
                "direction": [["west"], ["south"], ["east"], ["north"]],
            }
        )
        feature_layer = tf.keras.layers.DenseFeatures([age, age_buckets, embedding])
        return dataset.map(feature_layer).batch(2, drop_remainder=True)

    estimator = _estimator(lambda features, mode: Spec(mode=mode, predictions=features), tmp_path)
    outputs = estimator.predict(my_input_fn)
    assert np.asarray(next(outputs)).tolist() == [[18.0, 1, 0, 0, 0, 0, 0, 0, 1]]
    assert np.asarray(next(outputs)).tolist() == [[25.0, 0, 1, 0, 0, 0, 0, 1, 0]]
    assert np.asarray(next(outputs)).tolist() == [[55.0, 0, 0, 1, 0, 0, 1, 0, 0]]
    assert np.asarray(next(outputs)).tolist() == [[90.0, 0, 0, 0, 1, 1, 0, 0, 0]]


@pytest.mark.follows("testBatchSizeCalculationWithReplication")
def test_batch_size_calculation_with_replication(tmp_path):
    class ParamsReceived(RuntimeError):
        def __init__(self, params):
            super().__init__(str(params))
            self.params = params

    def mock_input_fn(params):
        raise ParamsReceived(params)

    config = ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(
            num_replicas=2, ipu_options=_options(auto_select_ipus=2)
        )
    )

    def make(**kwargs):
        return _estimator(_dummy_model_fn, tmp_path, config, **kwargs)

    for param in ["train_batch_size", "eval_batch_size", "predict_batch_size"]:
        with pytest.raises(ValueError, match="batch_size cannot be passed in params when a batch"):
            make(**{param: 1}, params={"batch_size": 1})
        with pytest.raises(ValueError, match=rf"{param} \(got 0\) must be positive"):
            make(**{param: 0})
        with pytest.raises(
            ValueError,
            match=rf"{param} \(got 1\) must be divisible by num_workers \* num_replicas \(1 \* 2\)",
        ):
            make(**{param: 1})
    estimator = make(train_batch_size=2, eval_batch_size=4, predict_batch_size=6)
    with pytest.raises(
        ValueError, match=r"input_fn must have params argument to receive params\['batch_size'\]"
    ):
        estimator.train(lambda: None, steps=1)
    with pytest.raises(ParamsReceived, match="'batch_size': 1"):
        estimator.train(mock_input_fn, steps=1)
    with pytest.raises(ParamsReceived, match="'batch_size': 2"):
        estimator.evaluate(mock_input_fn, steps=1)
    with pytest.raises(ParamsReceived, match="'batch_size': 3"):
        next(estimator.predict(mock_input_fn))
    # Only train_batch_size: evaluate and predict get no params["batch_size"].
    estimator = make(train_batch_size=2)
    with pytest.raises(ParamsReceived, match="'batch_size': 1"):
        estimator.train(mock_input_fn, steps=1)
    with pytest.raises(ParamsReceived) as raised:
        estimator.evaluate(mock_input_fn, steps=1)
    assert "batch_size" not in raised.value.params
    with pytest.raises(ParamsReceived) as raised:
        next(estimator.predict(mock_input_fn))
    assert "batch_size" not in raised.value.params
    # params["batch_size"] passed by hand is fine without the batch size arguments.
    estimator = make(params={"batch_size": 42})
    with pytest.raises(ParamsReceived, match="'batch_size': 42"):
        estimator.train(mock_input_fn, steps=1)
    with pytest.raises(ParamsReceived, match="'batch_size': 42"):
        estimator.evaluate(mock_input_fn, steps=1)
    with pytest.raises(ParamsReceived, match="'batch_size': 42"):
        next(estimator.predict(mock_input_fn))


@pytest.mark.follows("testInvalidPrefetchDepth")
def test_invalid_prefetch_depth(tmp_path):
    config = ipu_run_config.RunConfig(ipu_run_config=ipu_run_config.IPURunConfig(prefetch_depth=-1))
    estimator = _estimator(lambda features, labels, mode: None, tmp_path, config)
    with pytest.raises(ValueError, match="prefetch_depth must be greater than zero"):
        estimator.train(lambda: tf.data.Dataset.from_tensor_slices(([1.0], [0.0])), steps=1)


@pytest.fixture(scope="module")
def three_worker_cluster():
    # In-process servers cannot be stopped: one cluster for the module's distributed tests.
    return in_process_cluster.create(3)


@pytest.mark.follows("testDistributedMultipleIterationsPerLoopNotImplemented")
def test_distributed_multiple_iterations_per_loop_not_implemented(three_worker_cluster):
    cluster = {"worker": three_worker_cluster["worker"][:2]}

    def worker(task_type, task_id):
        strategy = IPUMultiWorkerStrategyV1(
            in_process_cluster.resolver(cluster, task_type, task_id)
        )
        message = r"iterations_per_loop > 1 \(got 2\) not supported with distribution"
        for config in (
            _config(iterations_per_loop=2, train_distribute=strategy),
            _config(
                iterations_per_loop=2,
                experimental_distribute=DistributeConfig(train_distribute=strategy),
            ),
        ):
            with pytest.raises(NotImplementedError, match=message):
                ipu_estimator.IPUEstimator(model_fn=_dummy_model_fn, config=config)
        return True

    assert in_process_cluster.run_between_graph_clients(worker, cluster) == {0: True, 1: True}


@pytest.mark.follows("testBatchSizeCalculationWithReplicationAndDistribution")
def test_batch_size_calculation_with_replication_and_distribution(three_worker_cluster, tmp_path):
    class ParamsReceived(RuntimeError):
        pass

    def mock_input_fn(params):
        raise ParamsReceived(str(params))

    train_cluster = {"worker": three_worker_cluster["worker"][:2]}
    IPUMultiWorkerStrategyV1._collective_key_base += 100_000  # noqa: SLF001 - fresh keys

    def worker(task_type, task_id):
        train_distribute = None
        if task_id < 2:
            train_distribute = IPUMultiWorkerStrategyV1(
                in_process_cluster.resolver(train_cluster, task_type, task_id)
            )
        eval_distribute = IPUMultiWorkerStrategyV1(
            in_process_cluster.resolver(three_worker_cluster, task_type, task_id)
        )
        # Replicas are fine here: nothing is compiled.
        config = ipu_run_config.RunConfig(
            ipu_run_config=ipu_run_config.IPURunConfig(
                num_replicas=2, ipu_options=_options(auto_select_ipus=2)
            ),
            train_distribute=train_distribute,
            eval_distribute=eval_distribute,
        )

        def make(**kwargs):
            return _estimator(_dummy_model_fn, tmp_path / str(task_id), config, **kwargs)

        if task_id < 2:
            with pytest.raises(
                ValueError,
                match=r"train_batch_size \(got 1\) must be divisible by num_workers \* "
                r"num_replicas \(2 \* 2\)",
            ):
                make(train_batch_size=1)
        with pytest.raises(
            ValueError,
            match=r"eval_batch_size \(got 1\) must be divisible by num_workers \* "
            r"num_replicas \(3 \* 2\)",
        ):
            make(eval_batch_size=1)
        estimator = make(train_batch_size=4, eval_batch_size=12, predict_batch_size=6)
        if task_id < 2:
            with pytest.raises(ParamsReceived, match="'batch_size': 1"):
                estimator.train(mock_input_fn, steps=1)
        with pytest.raises(ParamsReceived, match="'batch_size': 2"):
            estimator.evaluate(mock_input_fn, steps=1)
        with pytest.raises(ParamsReceived, match="'batch_size': 3"):
            next(estimator.predict(mock_input_fn))
        return True

    results = in_process_cluster.run_between_graph_clients(worker, three_worker_cluster)
    assert results == {0: True, 1: True, 2: True}
