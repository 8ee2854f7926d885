"""`IPUPipelineEstimator`, as the original's ipu_pipeline_estimator_test.py.

Stages of the pipeline run on two IPUs; training is checked against the analytical
gradient of w * x + y (each reduction method), evaluation and prediction against numpy.
"""

from __future__ import annotations

import glob

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_estimator, ipu_run_config, pipelining_ops
from tensorflow.python.ipu.gradient_accumulation import GradientAccumulationReductionMethod
from tensorflow.python.ipu.ipu_pipeline_estimator import (
    IPUPipelineEstimator,
    IPUPipelineEstimatorSpec,
)
from tensorflow.python.summary import summary_iterator

v1 = tf.compat.v1


def _make_config(iterations_per_loop: int = 1) -> ipu_run_config.RunConfig:
    options = ipu.config.IPUConfig()
    options.auto_select_ipus = 2
    return ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(
            num_shards=2, iterations_per_loop=iterations_per_loop, ipu_options=options
        )
    )


def _summary_values(model_dir: str, tag: str) -> list[float]:
    (events,) = glob.glob(model_dir + "/*tfevents*")
    return [
        v.simple_value
        for e in summary_iterator.summary_iterator(events)
        for v in e.summary.value
        if v.tag == tag
    ]


@pytest.mark.parametrize(
    ("gradient_accumulation_count", "weight_updates_per_loop", "reduction_method"),
    [
        (4, 1, GradientAccumulationReductionMethod.SUM),
        (4, 2, GradientAccumulationReductionMethod.MEAN),
        pytest.param(
            8, 2, GradientAccumulationReductionMethod.RUNNING_MEAN, marks=pytest.mark.slow
        ),
    ],
)
def test_train_with_analytical_gradient_reference(
    tmp_path, gradient_accumulation_count, weight_updates_per_loop, reduction_method
):
    x, y, initial_w, learning_rate = 1.5, 1.0, 2.0, 0.5
    iterations_per_loop = gradient_accumulation_count * weight_updates_per_loop

    def model_fn(mode):
        assert mode == "train"

        def stage1(features, labels):
            w = v1.get_variable(name="w", initializer=initial_w)
            return w * features, labels

        def stage2(partial, labels):
            return partial + labels

        def optimizer_function(loss):
            optimizer = v1.train.GradientDescentOptimizer(learning_rate)
            return pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[stage1, stage2],
            optimizer_function=optimizer_function,
            gradient_accumulation_count=gradient_accumulation_count,
            reduction_method=reduction_method,
        )

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(
            ([x] * iterations_per_loop, [y] * iterations_per_loop)
        )

    estimator = IPUPipelineEstimator(
        model_fn=model_fn, model_dir=str(tmp_path), config=_make_config(iterations_per_loop)
    )
    expected_w, expected_losses = initial_w, []
    for i in range(2):
        estimator.train(input_fn=input_fn, steps=iterations_per_loop)
        assert estimator.get_variable_value("global_step") == iterations_per_loop * (i + 1)
        step_losses = []
        for _ in range(weight_updates_per_loop):
            step_losses.append(expected_w * x + y)  # L = w * x + y, dL/dw = x
            factor = (
                gradient_accumulation_count
                if reduction_method is GradientAccumulationReductionMethod.SUM
                else 1
            )
            expected_w -= factor * learning_rate * x
        expected_losses.append(np.mean(step_losses))
        np.testing.assert_allclose(estimator.get_variable_value("w"), expected_w)
    np.testing.assert_allclose(_summary_values(str(tmp_path), "loss"), expected_losses)


@pytest.mark.parametrize("arg_type", [list, dict])
def test_evaluate(arg_type):
    gradient_accumulation_count = 2
    features = np.arange(gradient_accumulation_count, dtype=np.float32)

    def model_fn(mode):
        def stage1(features):
            return v1.get_variable("w1", initializer=1.0) * features

        def stage2(partial):
            squared = partial * partial
            if arg_type is list:
                return [partial, squared]
            return {"squared": squared, "partial": partial}

        def eval_metrics_fn(partial, squared):
            return {"mean": v1.metrics.mean(partial), "loss": squared}

        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[stage1, stage2],
            eval_metrics_fn=eval_metrics_fn,
            gradient_accumulation_count=gradient_accumulation_count,
        )

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(features).batch(1, drop_remainder=True)

    estimator = IPUPipelineEstimator(
        model_fn=model_fn, config=_make_config(iterations_per_loop=gradient_accumulation_count)
    )
    metrics = estimator.evaluate(input_fn=input_fn, steps=2)
    assert metrics["mean"] == np.mean(features)
    assert metrics["loss"] == np.mean(np.square(features))


def test_predict_tensor_and_dict():
    features = np.arange(8, dtype=np.float32)

    def model_fn(mode, params):
        def stage1(features):
            return v1.get_variable("w", initializer=2.0) * features

        def stage2(partial):
            if params["as_dict"]:
                return {"doubled_plus_one": partial + 1}
            return partial + 1

        return IPUPipelineEstimatorSpec(
            mode, computational_stages=[stage1, stage2], gradient_accumulation_count=2
        )

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(features).batch(1, drop_remainder=True)

    for as_dict in (False, True):
        estimator = IPUPipelineEstimator(
            model_fn=model_fn, config=_make_config(4), params={"as_dict": as_dict}
        )
        outputs = list(estimator.predict(input_fn, num_predictions=8))
        values = [o["doubled_plus_one"] if as_dict else o for o in outputs]
        np.testing.assert_allclose(np.ravel(values), features * 2 + 1)


def test_checks_of_the_original():
    def input_fn():
        return tf.data.Dataset.from_tensor_slices(([0.0], [0.0]))

    with pytest.raises(ValueError, match="must not have `features` or `labels` arguments"):
        IPUPipelineEstimator(
            model_fn=lambda features, labels, mode: None, config=_make_config()
        ).train(input_fn, steps=1)

    def returns_estimator_spec(mode):
        loss = tf.constant(0.0)
        return ipu_estimator.IPUEstimatorSpec(mode, train_op=tf.no_op(), loss=loss)

    with pytest.raises(TypeError, match="must return `IPUPipelineEstimatorSpec`"):
        IPUPipelineEstimator(model_fn=returns_estimator_spec, config=_make_config()).train(
            input_fn, steps=1
        )

    def zero_stages(mode):
        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[],
            gradient_accumulation_count=1,
            optimizer_function=lambda: None,
        )

    with pytest.raises(
        ValueError,
        match="This pipeline requires 0 devices, but `IPURunConfig.num_shards` was set to 2",
    ):
        IPUPipelineEstimator(model_fn=zero_stages, config=_make_config()).train(input_fn, steps=1)
    with pytest.raises(ValueError, match="must contain `optimizer_function` when training"):
        IPUPipelineEstimatorSpec("train", computational_stages=[], gradient_accumulation_count=1)
    with pytest.raises(ValueError, match="must contain `eval_metrics_fn` when evaluating"):
        IPUPipelineEstimatorSpec("eval", computational_stages=[], gradient_accumulation_count=1)
    with pytest.raises(ValueError, match="must contain `gradient_accumulation_count`"):
        IPUPipelineEstimatorSpec("infer", computational_stages=[])
    with pytest.raises(ValueError, match="`accumulate_outfeed` pipeline keyword argument"):
        IPUPipelineEstimatorSpec(
            "infer", computational_stages=[], gradient_accumulation_count=1, accumulate_outfeed=True
        )

    def two_stages(mode):
        return IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[lambda f, y: (f, y), lambda f, y: f + y],
            gradient_accumulation_count=4,
            optimizer_function=lambda loss: pipelining_ops.OptimizerFunctionOutput(
                v1.train.GradientDescentOptimizer(0.1), loss
            ),
        )

    with pytest.raises(ValueError, match=r"iterations_per_loop` \(got 2\) cannot be less than"):
        IPUPipelineEstimator(model_fn=two_stages, config=_make_config(2)).train(input_fn, steps=2)
    with pytest.raises(ValueError, match=r"iterations_per_loop` \(got 6\) must be divisible by"):
        IPUPipelineEstimator(model_fn=two_stages, config=_make_config(6)).train(input_fn, steps=6)
