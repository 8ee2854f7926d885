"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/ipu_pipeline_estimator_test.py`.

`IPUPipelineEstimator`: what its model_fn may take and must return, and how the
pipeline's devices, `num_shards`, `iterations_per_loop` and the gradient accumulation
count must agree (the original's errors and messages).
"""

from __future__ import annotations

import glob

import numpy as np
import pytest
import tensorflow as tf
from session_hooks import SessionRunCounter
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_estimator, ipu_run_config
from tensorflow.python.ipu.gradient_accumulation import GradientAccumulationReductionMethod
from tensorflow.python.ipu.ipu_pipeline_estimator import (
    IPUPipelineEstimator,
    IPUPipelineEstimatorSpec,
)
from tensorflow.python.summary import summary_iterator


@pytest.fixture(autouse=True)
def unconfigured_system():
    # An estimator configures the system from its ipu_options: no test inherits another's.
    yield
    ipu.config.reset_ipu_configuration()


def _make_config(iterations_per_loop=1, num_shards=2, ipus=2):
    options = ipu.config.IPUConfig()
    options.auto_select_ipus = ipus
    return ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(
            num_shards=num_shards, iterations_per_loop=iterations_per_loop, ipu_options=options
        )
    )


def _summary_values(model_dir, tag):
    [events_file] = glob.glob(model_dir + "/*tfevents*")
    return [
        v.simple_value
        for event in summary_iterator.summary_iterator(events_file)
        for v in event.summary.value
        if v.tag == tag
    ]


def _input_fn():
    return tf.data.Dataset.from_tensor_slices(([0], [0]))


def _stages():
    def stage1(features, labels):
        return features, labels

    def stage2(partial, labels):
        return partial + labels

    return [stage1, stage2]


def _train(model_fn, tmp_path, config=None, steps=1):
    estimator = IPUPipelineEstimator(
        model_fn=model_fn, config=config or _make_config(), model_dir=str(tmp_path)
    )
    estimator.train(input_fn=_input_fn, steps=steps)


@pytest.mark.follows("testModelFnMustNotHaveFeaturesOrLabelsArguments")
def test_model_fn_must_not_have_features_or_labels_arguments(tmp_path):
    def model_fn_with_features_and_labels(features, labels, mode):
        pass

    with pytest.raises(ValueError, match="must not have `features` or `labels` arguments"):
        _train(model_fn_with_features_and_labels, tmp_path)


@pytest.mark.follows("testModelFnMustReturnIPUPipelineEstimatorSpec")
def test_model_fn_must_return_ipu_pipeline_estimator_spec(tmp_path):
    def model_fn_returning_estimator_spec(mode):
        return ipu_estimator.IPUEstimatorSpec(mode, train_op=tf.no_op(), loss=tf.constant(0.0))

    with pytest.raises(TypeError, match="must return `IPUPipelineEstimatorSpec`"):
        _train(model_fn_returning_estimator_spec, tmp_path)


def _stageless_model_fn(device_mapping=None):
    def model_fn(mode):
        kwargs = {} if device_mapping is None else {"device_mapping": device_mapping}
        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[],
            gradient_accumulation_count=1,
            optimizer_function=lambda: None,
            **kwargs,
        )

    return model_fn


@pytest.mark.follows("testLengthOfComputationalStagesMustEqualNumShards")
def test_length_of_computational_stages_must_equal_num_shards(tmp_path):
    with pytest.raises(
        ValueError,
        match="This pipeline requires 0 devices, but `IPURunConfig.num_shards` was set to 2",
    ):
        _train(_stageless_model_fn(), tmp_path)


@pytest.mark.follows("testNumShardsMustEqualNumUniqueDevices")
def test_num_shards_must_equal_num_unique_devices(tmp_path):
    with pytest.raises(
        ValueError,
        match="This pipeline requires 4 devices, but `IPURunConfig.num_shards` was set to 2",
    ):
        _train(_stageless_model_fn([0, 1, 2, 3, 0]), tmp_path)


@pytest.mark.follows("testNumUniqueDevicesBelowNumShardsRange")
def test_num_unique_devices_below_num_shards_range(tmp_path):
    with pytest.raises(
        ValueError,
        match="This pipeline requires 2 devices, but `IPURunConfig.num_shards` was set to 4",
    ):
        _train(_stageless_model_fn([0, 1, 0]), tmp_path, _make_config(num_shards=4, ipus=4))


@pytest.mark.follows("testMustContainOptimizerFunctionWhenTraining")
def test_must_contain_optimizer_function_when_training(tmp_path):
    def model_fn_without_optimizer_function(mode):
        return IPUPipelineEstimatorSpec(
            mode, computational_stages=_stages(), gradient_accumulation_count=1
        )

    with pytest.raises(ValueError, match="must contain `optimizer_function` when training"):
        _train(model_fn_without_optimizer_function, tmp_path)


@pytest.mark.follows("testIterationsPerLoopAndGradientAccumulationValidation")
def test_iterations_per_loop_and_gradient_accumulation_validation(tmp_path):
    def make_model_fn(gradient_accumulation_count):
        def model_fn(mode):
            return IPUPipelineEstimatorSpec(
                mode,
                computational_stages=_stages(),
                gradient_accumulation_count=gradient_accumulation_count,
                optimizer_function=lambda: None,
            )

        return model_fn

    with pytest.raises(
        ValueError,
        match=r"`IPURunConfig.iterations_per_loop` \(got 4\) must be divisible by "
        r"`gradient_accumulation_count` \(got 3\)",
    ):
        _train(make_model_fn(3), tmp_path / "a", _make_config(iterations_per_loop=4), steps=4)
    with pytest.raises(
        ValueError,
        match=r"`IPURunConfig.iterations_per_loop` \(got 1\) cannot be less than "
        r"`gradient_accumulation_count` \(got 2\)",
    ):
        _train(make_model_fn(2), tmp_path / "b", _make_config(iterations_per_loop=1))


def _estimator(model_fn, tmp_path, accumulation=4):
    config = _make_config(iterations_per_loop=accumulation)
    return IPUPipelineEstimator(model_fn=model_fn, config=config, model_dir=str(tmp_path))


@pytest.mark.follows("testPredictTwoTensorsNotAllowed")
def test_predict_two_tensors_not_allowed(tmp_path):
    def my_model_fn(mode):
        def stage1(features):
            return tf.compat.v1.get_variable("w", initializer=1) * features

        def stage2(partial):
            return partial * partial, partial

        return IPUPipelineEstimatorSpec(
            mode, computational_stages=[stage1, stage2], gradient_accumulation_count=4
        )

    estimator = _estimator(my_model_fn, tmp_path)
    with pytest.raises(ValueError, match="must return exactly one prediction tensor"):
        next(estimator.predict(input_fn=lambda: tf.data.Dataset.from_tensor_slices([0])))


@pytest.mark.follows("testPredictDict")
def test_predict_dict(tmp_path):
    accumulation = 4

    def my_model_fn(mode):
        def stage1(features):
            return tf.compat.v1.get_variable("w", initializer=1) * features

        def stage2(partial):
            return {"squared": partial * partial, "partial": partial}

        return IPUPipelineEstimatorSpec(
            mode, computational_stages=[stage1, stage2], gradient_accumulation_count=accumulation
        )

    def my_input_fn():
        features = np.arange(accumulation, dtype=np.int32)
        return tf.data.Dataset.from_tensor_slices(features).batch(1, drop_remainder=True)

    estimator = _estimator(my_model_fn, tmp_path, accumulation)
    outputs = list(estimator.predict(input_fn=my_input_fn, num_predictions=accumulation))
    assert [(int(o["partial"]), int(o["squared"])) for o in outputs] == [
        (i, i**2) for i in range(accumulation)
    ]


def _squaring_stages():
    return [lambda features: features * features, lambda partial: partial + partial]


@pytest.mark.follows("testEvaluateMetricsMustBeDict")
def test_evaluate_metrics_must_be_dict(tmp_path):
    def model_fn_without_dict(mode):
        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=_squaring_stages(),
            eval_metrics_fn=lambda partial: partial,
            gradient_accumulation_count=4,
        )

    estimator = _estimator(model_fn_without_dict, tmp_path)
    with pytest.raises(TypeError, match="must return a dict"):
        estimator.evaluate(input_fn=lambda: tf.data.Dataset.from_tensor_slices([0]), steps=4)


@pytest.mark.follows("testEvaluateMetricsMustContainLoss")
def test_evaluate_metrics_must_contain_loss(tmp_path):
    def model_fn_without_loss(mode):
        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=_squaring_stages(),
            eval_metrics_fn=lambda p: {"prediction": tf.compat.v1.metrics.mean(p)},
            gradient_accumulation_count=4,
        )

    estimator = _estimator(model_fn_without_loss, tmp_path)
    with pytest.raises(KeyError, match="must contain 'loss'"):
        estimator.evaluate(input_fn=lambda: tf.data.Dataset.from_tensor_slices([0]), steps=4)


@pytest.mark.parametrize(("accumulation", "updates_per_loop"), [(4, 1), (4, 2), (8, 1), (8, 2)])
@pytest.mark.follows("testPredictTensor")
def test_predict_tensor(tmp_path, accumulation, updates_per_loop):
    iterations_per_loop = accumulation * updates_per_loop

    def my_model_fn(mode):
        assert mode == "infer"

        def stage1(features):
            return tf.compat.v1.get_variable("w", initializer=1) * features

        def stage2(partial):
            return partial * partial

        return IPUPipelineEstimatorSpec(
            mode, computational_stages=[stage1, stage2], gradient_accumulation_count=accumulation
        )

    def my_input_fn():
        features = np.arange(iterations_per_loop, dtype=np.int32)
        return tf.data.Dataset.from_tensor_slices(features).batch(1, drop_remainder=True)

    estimator = _estimator(my_model_fn, tmp_path, iterations_per_loop)
    predictions = estimator.predict(input_fn=my_input_fn, num_predictions=iterations_per_loop)
    assert [int(np.squeeze(p)) for p in predictions] == [i**2 for i in range(iterations_per_loop)]


@pytest.mark.parametrize("arg_type", [list, dict])
@pytest.mark.follows("testEvaluate")
def test_evaluate(tmp_path, arg_type):
    accumulation = 2

    def my_model_fn(mode):
        def stage1(features):
            return tf.compat.v1.get_variable("w1", initializer=1.0) * features

        def stage2(partial):
            squared = partial * partial
            if arg_type is list:
                return [partial, squared]
            # In reverse order: they are passed by name.
            return {"squared": squared, "partial": partial}

        def eval_metrics_fn(partial, squared):
            return {"mean": tf.compat.v1.metrics.mean(partial), "loss": squared}

        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[stage1, stage2],
            eval_metrics_fn=eval_metrics_fn,
            gradient_accumulation_count=accumulation,
        )

    features = np.arange(accumulation, dtype=np.float32)

    def my_input_fn():
        return tf.data.Dataset.from_tensor_slices(features).batch(1, drop_remainder=True)

    estimator = _estimator(my_model_fn, tmp_path, accumulation)
    metrics = estimator.evaluate(input_fn=my_input_fn, steps=2)
    assert metrics["mean"] == np.mean(features)
    assert metrics["loss"] == np.mean(np.square(features))


@pytest.mark.parametrize(
    ("accumulation", "updates_per_loop", "reduction_method"),
    [
        (4, 1, GradientAccumulationReductionMethod.SUM),
        (4, 2, GradientAccumulationReductionMethod.MEAN),
        (8, 2, GradientAccumulationReductionMethod.RUNNING_MEAN),
    ],
)
@pytest.mark.follows("testTrainWithAnalyticalGradientReference")
def test_train_with_analytical_gradient_reference(
    tmp_path, accumulation, updates_per_loop, reduction_method
):
    x, y, initial_w, learning_rate = 1.5, 1.0, 2.0, 0.5
    iterations_per_loop = accumulation * updates_per_loop

    def my_model_fn(mode):
        def stage1(features, labels):
            w = tf.compat.v1.get_variable(name="w", initializer=initial_w)
            return w * features, labels

        def stage2(partial, labels):
            return partial + labels

        def optimizer_function(loss):
            optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
            return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[stage1, stage2],
            optimizer_function=optimizer_function,
            gradient_accumulation_count=accumulation,
            reduction_method=reduction_method,
        )

    def my_input_fn():
        return tf.data.Dataset.from_tensor_slices(
            ([x] * iterations_per_loop, [y] * iterations_per_loop)
        )

    estimator = _estimator(my_model_fn, tmp_path, iterations_per_loop)
    expected_w, expected_losses = initial_w, []
    for i in range(2):
        estimator.train(input_fn=my_input_fn, steps=iterations_per_loop)
        assert estimator.get_variable_value("global_step") == iterations_per_loop * (i + 1)
        step_losses = []
        for _ in range(updates_per_loop):
            step_losses.append(expected_w * x + y)  # L = w x + y, dL/dw = x
            scale = (
                accumulation if reduction_method == GradientAccumulationReductionMethod.SUM else 1
            )
            expected_w -= scale * learning_rate * x
        expected_losses.append(np.mean(step_losses))
        np.testing.assert_allclose(estimator.get_variable_value("w"), expected_w)
    np.testing.assert_allclose(_summary_values(estimator.model_dir, "loss"), expected_losses)


@pytest.mark.follows("testEvaluateWithStagesMappedToSameIpu")
def test_evaluate_with_stages_mapped_to_same_ipu(tmp_path):
    accumulation = 3

    def my_model_fn(mode):
        assert mode == "eval"

        def stage1(features):
            return tf.compat.v1.get_variable("w1", initializer=1.0) * features

        def stage2(partial):
            return tf.compat.v1.get_variable("w2", initializer=1.0) * partial

        def stage3(partial):
            return partial, partial * partial

        def eval_metrics_fn(partial, squared):
            return {"mean": tf.compat.v1.metrics.mean(partial), "loss": squared}

        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[stage1, stage2, stage3],
            device_mapping=[0, 1, 0],
            eval_metrics_fn=eval_metrics_fn,
            gradient_accumulation_count=accumulation,
        )

    features = np.arange(accumulation, dtype=np.float32)

    def my_input_fn():
        return tf.data.Dataset.from_tensor_slices(features).batch(1, drop_remainder=True)

    metrics = _estimator(my_model_fn, tmp_path, accumulation).evaluate(my_input_fn, steps=3)
    assert metrics["mean"] == np.mean(features)
    assert metrics["loss"] == np.mean(np.square(features))


@pytest.mark.parametrize("updates_per_loop", [1, 2])
@pytest.mark.follows("testPassGlobalStepAsInput")
def test_pass_global_step_as_input(tmp_path, updates_per_loop):
    x, y, initial_w, accumulation = 1.5, 1.0, 2.0, 4
    iterations_per_loop = accumulation * updates_per_loop

    def my_model_fn(mode):
        def stage1(global_step, features, labels):
            w = tf.compat.v1.get_variable(name="w", initializer=initial_w)
            return global_step, w * features, labels

        def stage2(global_step, partial, labels):
            return global_step, partial + labels

        def optimizer_function(global_step, loss):
            optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1 - 0.001 * global_step)
            return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

        def eval_metrics_fn(global_step, loss):
            return {"global_step_observed": tf.compat.v1.metrics.mean(global_step), "loss": loss}

        global_step = tf.cast(tf.compat.v1.train.get_global_step(), np.float32)
        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[stage1, stage2],
            optimizer_function=optimizer_function,
            eval_metrics_fn=eval_metrics_fn,
            inputs=[global_step],
            gradient_accumulation_count=accumulation,
        )

    def my_input_fn():
        return tf.data.Dataset.from_tensor_slices(
            ([x] * iterations_per_loop, [y] * iterations_per_loop)
        )

    estimator = _estimator(my_model_fn, tmp_path, iterations_per_loop)
    want_w = initial_w
    for i in range(2):
        estimator.train(input_fn=my_input_fn, steps=iterations_per_loop)
        assert estimator.get_variable_value("global_step") == iterations_per_loop * (i + 1)
        # Each update: the learning rate of the global step the loop was given, times
        # d(loss)/dw = x summed over the accumulated mini-batches.
        learning_rate = 0.1 - 0.001 * iterations_per_loop * i
        want_w -= updates_per_loop * learning_rate * accumulation * x
        np.testing.assert_allclose(estimator.get_variable_value("w"), want_w, rtol=1e-5)
    out = estimator.evaluate(input_fn=my_input_fn, steps=iterations_per_loop)
    assert out["global_step_observed"] == 2 * iterations_per_loop


@pytest.mark.follows("testPassingHooksFromModelFunction")
def test_passing_hooks_from_model_function(tmp_path):
    def my_input_fn():
        features = np.array([[1.0]], dtype=np.float32)
        labels = np.array([[2.0]], dtype=np.float32)
        dataset = tf.data.Dataset.from_tensor_slices((features, labels))
        return dataset.batch(1, drop_remainder=True).repeat()

    training_hook, evaluation_hook, prediction_hook = (SessionRunCounter() for _ in range(3))

    def my_model_fn(mode):
        def stage1(features, labels):
            return tf.compat.v1.get_variable(name="w", initializer=0.1) * features, labels

        def stage2(partial, labels):
            return partial + labels

        def optimizer_function(loss):
            optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.5)
            return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[stage1, stage2],
            optimizer_function=optimizer_function,
            eval_metrics_fn=lambda loss: {"loss": loss},
            gradient_accumulation_count=4,
            training_hooks=[training_hook],
            evaluation_hooks=[evaluation_hook],
            prediction_hooks=[prediction_hook],
        )

    estimator = _estimator(my_model_fn, tmp_path, 4)
    estimator.train(input_fn=my_input_fn, steps=4)
    assert training_hook.num_session_runs == 1
    predictions = estimator.predict(input_fn=my_input_fn)
    assert prediction_hook.num_session_runs == 0  # not before the generator is consumed
    next(predictions)
    assert prediction_hook.num_session_runs == 1
    del predictions
    estimator.evaluate(my_input_fn, steps=4)
    assert evaluation_hook.num_session_runs == 1
