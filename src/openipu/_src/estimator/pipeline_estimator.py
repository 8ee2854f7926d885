"""`IPUPipelineEstimator` and `IPUPipelineEstimatorSpec` (spec 21.13.2).

The model_fn returns pipeline stages instead of a step; each session run is one
`pipelining_ops.pipeline` of `iterations_per_loop / gradient_accumulation_count` repeats
(the engine's pipeline: stages on their IPUs, gradients accumulated, one weight update per
repeat), as the original's ipu_pipeline_estimator.py builds it.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.util import function_utils

from openipu._src.engine.gradient_accumulation import GradientAccumulationReductionMethod
from openipu._src.estimator.estimator_base import IPUEstimatorBase
from openipu._src.estimator.model_fn_wrapper import HostSide, LoopWrapperBase, element_arguments
from openipu._src.estimator.run_config import RunConfig
from openipu._src.estimator.spec import LOSS_METRIC_KEY, ModeKeys, validate_hooks
from openipu._src.pipelining import pipelining_ops


class IPUPipelineEstimatorSpec(
    collections.namedtuple(
        "IPUPipelineEstimatorSpec",
        [
            "mode",
            "computational_stages",
            "gradient_accumulation_count",
            "eval_metrics_fn",
            "optimizer_function",
            "device_mapping",
            "loss_accumulator_dtype",
            "training_hooks",
            "evaluation_hooks",
            "prediction_hooks",
            "reduction_method",
            "pipeline_op_kwargs",
        ],
    )
):
    """Ops and objects returned from a `model_fn` and passed to `IPUPipelineEstimator`."""

    def __new__(
        cls,
        mode: str,
        computational_stages: list[Callable[..., Any]],
        gradient_accumulation_count: int | None = None,
        eval_metrics_fn: Callable[..., Any] | None = None,
        optimizer_function: Callable[..., Any] | None = None,
        device_mapping: list[int] | None = None,
        loss_accumulator_dtype: Any = None,
        training_hooks: Any = None,
        evaluation_hooks: Any = None,
        prediction_hooks: Any = None,
        reduction_method: Any = GradientAccumulationReductionMethod.SUM,
        **pipeline_op_kwargs: Any,
    ) -> IPUPipelineEstimatorSpec:
        # The original's checks and messages.
        if mode == ModeKeys.TRAIN and not optimizer_function:
            raise ValueError(
                "`IPUPipelineEstimatorSpec` must contain `optimizer_function` when training"
            )
        if mode == ModeKeys.EVAL and not eval_metrics_fn:
            raise ValueError(
                "`IPUPipelineEstimatorSpec` must contain `eval_metrics_fn` when evaluating"
            )
        if not gradient_accumulation_count:
            raise ValueError(
                "`IPUPipelineEstimatorSpec` must contain `gradient_accumulation_count`"
            )
        if "accumulate_outfeed" in pipeline_op_kwargs:
            # The estimator accumulates the loss with it.
            raise ValueError(
                "The `accumulate_outfeed` pipeline keyword argument cannot be passed to the "
                "`IPUPipelineEstimatorSpec`."
            )
        return super().__new__(
            cls,
            mode=mode,
            computational_stages=computational_stages,
            gradient_accumulation_count=gradient_accumulation_count,
            eval_metrics_fn=eval_metrics_fn,
            optimizer_function=optimizer_function,
            device_mapping=device_mapping,
            loss_accumulator_dtype=loss_accumulator_dtype,
            # Kept as given (ipu_pipeline_estimator.py): only the hooks of the mode that
            # runs are checked, when the estimator takes them.
            training_hooks=training_hooks,
            evaluation_hooks=evaluation_hooks,
            prediction_hooks=prediction_hooks,
            reduction_method=reduction_method,
            pipeline_op_kwargs=pipeline_op_kwargs,
        )


class ModelFnPipelineWrapper(LoopWrapperBase):
    """The user's model_fn as one pipeline per session run."""

    def __init__(self, *args: Any) -> None:  # LoopWrapperBase's arguments
        super().__init__(*args)
        self._eval_metrics_fn: Callable[..., Any] | None = None
        self._gradient_accumulation_count: int | None = None

    @staticmethod
    def need_outfeed(mode: str) -> bool:
        del mode
        return True

    def _repeat_count(self, spec: IPUPipelineEstimatorSpec) -> int:
        iterations = self._config.ipu_run_config.iterations_per_loop
        count = spec.gradient_accumulation_count
        # The original's checks and messages.
        if iterations < count:
            raise ValueError(
                f"`IPURunConfig.iterations_per_loop` (got {iterations}) cannot be less than "
                f"`gradient_accumulation_count` (got {count})"
            )
        repeats, remainder = divmod(iterations, count)
        if remainder != 0:
            raise ValueError(
                f"`IPURunConfig.iterations_per_loop` (got {iterations}) must be divisible by "
                f"`gradient_accumulation_count` (got {count})"
            )
        return repeats

    def _pipeline(self, spec: IPUPipelineEstimatorSpec, name: str, **kwargs: Any) -> Any:
        return pipelining_ops.pipeline(
            infeed_queue=self._infeed,
            outfeed_queue=self._outfeed,
            computational_stages=spec.computational_stages,
            gradient_accumulation_count=spec.gradient_accumulation_count,
            repeat_count=self._repeat_count(spec),
            device_mapping=spec.device_mapping,
            name=name,
            **kwargs,
            **spec.pipeline_op_kwargs,
        )

    def create_training_loop(self) -> Callable[[], Any]:
        def training_pipeline() -> Any:
            spec = self._call_model_fn(ModeKeys.TRAIN)
            self._gradient_accumulation_count = spec.gradient_accumulation_count
            self.captured_hooks = validate_hooks(spec.training_hooks)
            return self._pipeline(
                spec,
                "ipu_pipeline_estimator_train",
                optimizer_function=spec.optimizer_function,
                outfeed_loss=True,
                accumulate_outfeed=True,
                accumulate_outfeed_dtype=spec.loss_accumulator_dtype,
                reduction_method=spec.reduction_method,
            )

        return training_pipeline

    def training_host_side(self, compiled: Any) -> HostSide:
        assert self._gradient_accumulation_count
        loss = self._dequeue_after(compiled)
        with tf.device("/device:CPU:0"):
            # Summed over each repeat's mini-batches: the mean over repeats (and replicas),
            # normalised by the mini-batches of a repeat.
            loss = tf.reduce_mean(tf.cast(loss, tf.float32)) / self._gradient_accumulation_count
        return HostSide(loss=loss, train_op=compiled)

    def create_evaluation_loop(self) -> Callable[[], Any]:
        def evaluation_pipeline() -> Any:
            spec = self._call_model_fn(ModeKeys.EVAL)
            self._eval_metrics_fn = spec.eval_metrics_fn
            self.captured_hooks = validate_hooks(spec.evaluation_hooks)
            return self._pipeline(spec, "ipu_pipeline_estimator_eval", accumulate_outfeed=False)

        return evaluation_pipeline

    def evaluation_host_side(self, compiled: Any) -> HostSide:
        assert self._eval_metrics_fn is not None
        outfed = self._dequeue_after(compiled)
        with tf.device("/device:CPU:0"):
            # Outside the dependency on the loop: the metrics' values are read once more at
            # the end, which must not run the loop again.
            args, kwargs = element_arguments(outfed)
            metrics = self._eval_metrics_fn(*args, **kwargs)
        if not isinstance(metrics, dict):
            raise TypeError(f"The `eval_metrics_fn` must return a dict, but got {type(metrics)}.")
        if LOSS_METRIC_KEY not in metrics:
            raise KeyError(
                f"The dict returned from `eval_metrics_fn` must contain '{LOSS_METRIC_KEY}'."
            )
        metrics = dict(metrics)
        loss = metrics.pop(LOSS_METRIC_KEY)
        return HostSide(loss=_metric_value(loss), host_metrics=metrics)

    def create_prediction_loop(self) -> Callable[[], Any]:
        def prediction_pipeline() -> Any:
            spec = self._call_model_fn(ModeKeys.PREDICT)
            self.captured_hooks = validate_hooks(spec.prediction_hooks)
            return self._pipeline(spec, "ipu_pipeline_estimator_predict", accumulate_outfeed=False)

        return prediction_pipeline

    def prediction_host_side(self, compiled: Any) -> HostSide:
        predictions = self._dequeue_after(compiled)
        if isinstance(predictions, (dict, tf.Tensor)):
            return HostSide(predictions=predictions)
        predictions = list(predictions)
        if len(predictions) != 1:
            raise ValueError(
                "The last computational stage must return exactly one prediction tensor, but "
                f"got {len(predictions)}"
            )
        return HostSide(predictions=predictions[0])

    def _call_model_fn(self, mode: str) -> IPUPipelineEstimatorSpec:
        names = function_utils.fn_args(self._model_fn)
        # The original's checks and messages (ipu_pipeline_estimator.py).
        if "features" in names or "labels" in names:
            raise ValueError(
                "The `model_fn` used with `IPUPipelineEstimator` must not have `features` or "
                "`labels` arguments. They are instead passed to the first pipeline stage "
                "function."
            )
        spec = self._model_fn(**self._model_fn_kwargs(mode))
        if not isinstance(spec, IPUPipelineEstimatorSpec):
            raise TypeError(
                "The `model_fn` used with `IPUPipelineEstimator` must return "
                "`IPUPipelineEstimatorSpec`."
            )
        if spec.device_mapping is not None:
            required = len(set(spec.device_mapping))
        else:
            required = len(spec.computational_stages)
        shards = self._config.ipu_run_config.num_shards
        if required not in range(shards // 2 + 1, shards + 1):
            raise ValueError(
                f"This pipeline requires {required} devices, but `IPURunConfig.num_shards` was "
                f"set to {shards} (num_shards/2 < pipeline_devices <= num_shards)."
            )
        return spec


def _metric_value(loss: Any) -> tf.Tensor:
    """The loss an `eval_metrics_fn` returned (the run's outfed losses): their mean."""
    return tf.reduce_mean(tf.cast(loss, tf.float32))


class IPUPipelineEstimator(IPUEstimatorBase):
    """Estimator for pipelining on IPUs: the model_fn returns an `IPUPipelineEstimatorSpec`."""

    _wrapper_class = ModelFnPipelineWrapper

    def __init__(
        self,
        model_fn: Callable[..., Any],
        model_dir: str | os.PathLike | None = None,
        config: RunConfig | None = None,
        params: dict | None = None,
        warm_start_from: Any = None,
    ) -> None:
        super().__init__(
            model_fn,
            model_dir=model_dir,
            config=config,
            params=params,
            warm_start_from=warm_start_from,
        )

    def _validate_config(self, config: RunConfig) -> None:
        # Pipelines may run several iterations per loop with distribution (the original).
        del config
