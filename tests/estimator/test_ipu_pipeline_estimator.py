"""`IPUPipelineEstimator`, as the original's ipu_pipeline_estimator_test.py.

Stages of the pipeline run on two IPUs; evaluation and prediction are checked against
numpy (training against the analytical gradient is in
tests/conformance/test_ipu_pipeline_estimator_test.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_estimator, ipu_run_config, pipelining_ops
from tensorflow.python.ipu.ipu_pipeline_estimator import (
    IPUPipelineEstimator,
    IPUPipelineEstimatorSpec,
)

v1 = tf.compat.v1


def _make_config(iterations_per_loop: int = 1) -> ipu_run_config.RunConfig:
    options = ipu.config.IPUConfig()
    options.auto_select_ipus = 2
    return ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(
            num_shards=2, iterations_per_loop=iterations_per_loop, ipu_options=options
        )
    )


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
