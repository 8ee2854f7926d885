"""The user's `model_fn` inside `IPUEstimator`'s device loops (the original's _ModelFnWrapper).

Each mode builds one device loop of `iterations_per_loop` steps reading the infeed
(`loops.repeat`, the engine's loop), compiled with `ipu_compiler.compile`; the host side
then reads what the loop left: the mean loss of its steps, the outfed metrics or
predictions, the `host_call`'s tensors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.util import function_utils

from openipu._src import loops
from openipu._src.engine.outfeed_queue import IPUOutfeedQueue
from openipu._src.engine.replicas import lockstep, replicated
from openipu._src.estimator.spec import (
    IPUEstimatorSpec,
    ModeKeys,
    check_is_tensor,
    check_is_tensor_or_operation,
)
from openipu._src.feeds.infeed import IPUInfeedQueue
from openipu._src.ops import cross_replica_ops

_ASSIGN_ADD_OP = "AssignAddVariableOp"


def supported_kwargs(function: Callable[..., Any], available: dict[str, Any]) -> dict[str, Any]:
    """The entries of `available` that `function` takes (model_fn, input_fn: by name)."""
    names = function_utils.fn_args(function)
    return {name: value for name, value in available.items() if name in names}


def operations_of(values: Any) -> list[Any]:
    """The tensors and operations of a compiled program's outputs (to wait for)."""
    return [v for v in tf.nest.flatten(values) if isinstance(v, (tf.Tensor, tf.Operation))]


def unpack_features_and_labels(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """(features, labels) of one dataset element (the original's rules and messages)."""
    if args and kwargs:
        raise ValueError("Invalid dataset with both tuple and keywords")
    if not args and not kwargs:
        raise ValueError("Invalid dataset with neither tuple nor keywords")
    if kwargs:
        return kwargs, None
    if len(args) == 1:
        return args[0], None
    if len(args) == 2:
        return args[0], args[1]
    raise ValueError(f"Invalid dataset tuple, expected 1 or 2 elements, got {len(args)}")


def element_arguments(element: Any) -> tuple[tuple, dict]:
    """A dataset element as a loop body's arguments (as `loops` passes them)."""
    if isinstance(element, dict):
        return (), dict(element)
    if isinstance(element, (list, tuple)):
        return tuple(element), {}
    return (element,), {}


def validate_global_step_not_incremented(graph: tf.Graph) -> None:
    """The estimator counts the steps; a model that increments `global_step` is refused."""
    for op in graph.get_operations():
        if op.type == _ASSIGN_ADD_OP and "global_step" in op.inputs[0].name:
            # The original's message (ipu_estimator.py).
            raise ValueError(
                "Illegal increment of the `global_step` variable in the `model_fn`. This is "
                "usually caused by passing it as an argument to the `Optimizer.minimize()` "
                "function. Please remove this argument as the IPUEstimator itself is "
                "responsible for incrementing it."
            )


def extract_metric_values(eval_metric_ops: dict[str, Any]) -> dict[str, tf.Tensor]:
    """Each metric's update op, whose result is the metric's value after the update."""
    values = {}
    for name, (value, update_op) in sorted(eval_metric_ops.items()):
        del value  # may be read before the update: the update's result is used instead
        check_is_tensor(update_op, "update_op")
        values[name] = update_op
    return values


@dataclasses.dataclass
class HostSide:
    """What the host does with a mode's compiled loop (built after it)."""

    loss: tf.Tensor | None = None
    train_op: Any = None
    #: EVAL: metrics computed on the IPU, their last values per run ([replicas] averaged).
    ipu_metrics: dict[str, tf.Tensor] = dataclasses.field(default_factory=dict)
    #: EVAL: metrics computed on the host: name -> (value, update_op).
    host_metrics: dict[str, tuple[Any, Any]] = dataclasses.field(default_factory=dict)
    predictions: Any = None


class LoopWrapperBase:
    """The model_fn and the feeds of one mode's program; the hooks the model_fn returned."""

    def __init__(
        self,
        model_fn: Callable[..., Any],
        config: Any,
        params: dict,
        infeed: IPUInfeedQueue,
        outfeed: IPUOutfeedQueue | None,
    ) -> None:
        self._model_fn = model_fn
        self._config = config
        self._params = params
        self._infeed = infeed
        self._outfeed = outfeed
        self.captured_hooks: tuple[Any, ...] = ()

    def _dequeue_after(self, compiled: Any) -> Any:
        """The outfeed's values, read on the host once the compiled program has run."""
        assert self._outfeed is not None
        with tf.device("/device:CPU:0"), tf.control_dependencies(operations_of(compiled)):
            return self._outfeed.dequeue(wait_for_completion=True)

    def _model_fn_kwargs(self, mode: str) -> dict[str, Any]:
        available = {"mode": mode, "params": self._params, "config": self._config}
        return supported_kwargs(self._model_fn, available)


class ModelFnWrapper(LoopWrapperBase):
    """`model_fn` as the body of IPUEstimator's device loops."""

    def __init__(self, *args: Any) -> None:  # LoopWrapperBase's arguments
        super().__init__(*args)
        self._iterations = self._config.ipu_run_config.iterations_per_loop
        self._num_shards = self._config.ipu_run_config.num_shards
        self._host_call: tuple[Callable[..., Any], list[tf.Tensor]] | None = None
        self._eval_metrics_fn: Callable[..., Any] | None = None

    @staticmethod
    def need_outfeed(mode: str) -> bool:
        return mode != ModeKeys.TRAIN

    def _capture_hooks(self, hooks: tuple[Any, ...]) -> None:
        if hooks:
            self.captured_hooks = tuple(hooks)

    def _loop_replica_mean(self, loop_sum: tf.Tensor) -> tf.Tensor:
        if lockstep.replica_count() > 1:
            loop_sum = cross_replica_ops.cross_replica_mean(loop_sum)
        return loop_sum / self._iterations

    def _span_shards(self) -> None:
        # A replica spans `num_shards` IPUs: a device of N IPUs runs N / num_shards replicas.
        replicated.require_ipus_per_replica(self._num_shards)

    # Training -------------------------------------------------------------------------------

    def create_training_loop(self) -> Callable[[], Any]:
        def training_step(total_loss: tf.Tensor, *args: Any, **kwargs: Any) -> tf.Tensor:
            features, labels = unpack_features_and_labels(args, kwargs)
            reductions = cross_replica_ops.reductions_built()
            spec = self._call_model_fn(features, labels, ModeKeys.TRAIN)
            if lockstep.replica_count() > 1 and cross_replica_ops.reductions_built() == reductions:
                _refuse_unreduced_replicas()
            if spec.loss is None:
                raise ValueError("EstimatorSpec must contain loss when training")
            if spec.train_op is None:
                raise ValueError("EstimatorSpec must contain train_op when training")
            self._capture_hooks(spec.training_hooks)
            host_call = getattr(spec, "host_call", None)
            if host_call:
                function, tensors = host_call
                for tensor in tensors:
                    check_is_tensor_or_operation(tensor, "`host_call` argument")
                self._host_call = (function, list(tensors))
            with tf.control_dependencies([spec.train_op]):
                total_loss = total_loss + tf.cast(spec.loss, tf.float32)
            validate_global_step_not_incremented(tf.compat.v1.get_default_graph())
            return total_loss

        def training_loop() -> Any:
            self._span_shards()
            if self._iterations == 1:
                # No loop: the host_call's tensors leave the program as its outputs.
                args, kwargs = element_arguments(self._infeed._dequeue())  # noqa: SLF001
                total = training_step(tf.constant(0.0), *args, **kwargs)
                host_tensors = self._host_call[1] if self._host_call else []
                return (self._loop_replica_mean(total), *host_tensors)
            total = loops.repeat(self._iterations, training_step, [0.0], self._infeed)
            if self._host_call is not None:
                raise ValueError("host_call is not allowed for iterations_per_loop > 1")
            return (self._loop_replica_mean(_single(total)),)

        return training_loop

    def training_host_side(self, compiled: Any) -> HostSide:
        outputs = list(compiled)
        loss = outputs[0]
        if self._host_call is None:
            return HostSide(loss=loss, train_op=loss)
        function, _ = self._host_call
        with tf.device("/device:CPU:0"):
            result = function(*outputs[1:])
        # The original's check of what the host call returns.
        check_is_tensor_or_operation(result, "`host_call` return value")
        return HostSide(loss=loss, train_op=result)

    # Evaluation -----------------------------------------------------------------------------

    def create_evaluation_loop(self) -> Callable[[], Any]:
        assert self._outfeed is not None

        def evaluation_step(total_loss: tf.Tensor, *args: Any, **kwargs: Any) -> Any:
            features, labels = unpack_features_and_labels(args, kwargs)
            spec = self._call_model_fn(features, labels, ModeKeys.EVAL)
            if spec.loss is None:
                raise ValueError("EstimatorSpec must contain loss when evaluating")
            eval_metric_ops = spec.eval_metric_ops
            eval_metrics = getattr(spec, "eval_metrics", None)
            if not eval_metric_ops and not eval_metrics:
                raise ValueError(
                    "EstimatorSpec must contain either eval_metric_ops or eval_metrics when "
                    "evaluating"
                )
            if eval_metric_ops and eval_metrics:
                raise ValueError(
                    "EstimatorSpec cannot contain both eval_metric_ops and eval_metrics"
                )
            self._capture_hooks(spec.evaluation_hooks)
            if eval_metric_ops:
                outfeed_values = extract_metric_values(eval_metric_ops)
            else:
                assert eval_metrics is not None
                self._eval_metrics_fn, outfeed_values = eval_metrics
            total_loss = total_loss + tf.cast(spec.loss, tf.float32)
            assert self._outfeed is not None
            return total_loss, self._outfeed.enqueue(outfeed_values)

        def evaluation_loop() -> Any:
            self._span_shards()
            total = loops.repeat(self._iterations, evaluation_step, [0.0], self._infeed)
            return (self._loop_replica_mean(_single(total)),)

        return evaluation_loop

    def evaluation_host_side(self, compiled: Any) -> HostSide:
        loss = list(compiled)[0]
        outfed = self._dequeue_after(compiled)
        if self._eval_metrics_fn is not None:
            args, kwargs = element_arguments(outfed)
            with tf.device("/device:CPU:0"):
                metric_ops = self._eval_metrics_fn(*args, **kwargs)
            return HostSide(loss=loss, host_metrics=dict(metric_ops))
        # Metrics computed on the IPU: the last update of each run is the metric's value so
        # far; replicas' values are averaged (as the original; not every metric averages
        # correctly, which is what `eval_metrics` on the host is for).
        ipu_metrics = {
            name: tf.reduce_mean(tf.cast(values[-1], tf.float32)) for name, values in outfed.items()
        }
        return HostSide(loss=loss, ipu_metrics=ipu_metrics)

    # Prediction -----------------------------------------------------------------------------

    def create_prediction_loop(self) -> Callable[[], Any]:
        assert self._outfeed is not None

        def prediction_step(*args: Any, **kwargs: Any) -> Any:
            features, _ = unpack_features_and_labels(args, kwargs)
            spec = self._call_model_fn(features, None, ModeKeys.PREDICT)
            if spec.predictions is None:
                raise ValueError("EstimatorSpec must contain predictions when predicting")
            self._capture_hooks(spec.prediction_hooks)
            assert self._outfeed is not None
            return self._outfeed.enqueue(spec.predictions)

        def prediction_loop() -> Any:
            self._span_shards()
            return loops.repeat(self._iterations, prediction_step, infeed_queue=self._infeed)

        return prediction_loop

    def prediction_host_side(self, compiled: Any) -> HostSide:
        return HostSide(predictions=self._dequeue_after(compiled))

    # The user's model_fn ----------------------------------------------------------------------

    def _call_model_fn(self, features: Any, labels: Any, mode: str) -> Any:
        kwargs = self._model_fn_kwargs(mode)
        if "labels" in function_utils.fn_args(self._model_fn):
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")
        spec = self._model_fn(features=features, **kwargs)
        # A stock EstimatorSpec (from tensorflow_estimator, if installed) is accepted too.
        if not isinstance(spec, IPUEstimatorSpec) and type(spec).__name__ != "EstimatorSpec":
            raise ValueError("`model_fn` must return IPUEstimatorSpec or EstimatorSpec")
        return spec


def _refuse_unreduced_replicas() -> None:
    # The original's check and words (ipu_estimator.py, _validate_replicated_training_graph).
    raise ValueError(
        "This is not a valid replicated training graph because no IpuCrossReplicaSum or "
        "IpuCrossReplicaMean operations were found. Did you remember to use the "
        "`tensorflow.python.ipu.optimizers.CrossReplicaOptimizer`?"
    )


def _single(values: Any) -> tf.Tensor:
    """The one loop-carried value of a loop."""
    if isinstance(values, (list, tuple)):
        return values[0]
    return values
