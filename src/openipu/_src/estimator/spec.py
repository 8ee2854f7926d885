"""`IPUEstimatorSpec`: what a `model_fn` returns to `IPUEstimator` (spec 21.13.1).

The checks of the stock `EstimatorSpec` (tensorflow_estimator's model_fn.py, gone from
TensorFlow 2.21) are kept here with their messages, as the original's spec applies them.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf
from tensorflow.python.saved_model.model_utils.mode_keys import EstimatorModeKeys
from tensorflow.python.types import core as core_types

#: 'train', 'eval', 'infer': the estimator modes (`tf.estimator.ModeKeys`).
ModeKeys = EstimatorModeKeys
#: The key of the loss in evaluation results (and in an `eval_metrics_fn`'s dict).
LOSS_METRIC_KEY = "loss"


def check_is_tensor_or_operation(value: object, name: str) -> None:
    # Tensor-like as tensorflow_estimator checks it (ops.is_dense_tensor_like: a
    # `types.core.Tensor`), so a resource variable's `assign_add` result passes.
    if not isinstance(value, (core_types.Tensor, tf.Operation)):
        raise TypeError(f"{name} must be Operation or Tensor, given: {value}")


def check_is_tensor(value: object, name: str) -> None:
    if not isinstance(value, core_types.Tensor):
        raise TypeError(f"{name} must be Tensor, given: {value}")


def validate_train_op(train_op: object, mode: str) -> object:
    if train_op is None:
        if mode == ModeKeys.TRAIN:
            raise ValueError("Missing train_op.")
        return None
    check_is_tensor_or_operation(train_op, "train_op")
    return train_op


def validate_loss(loss: object, mode: str) -> tf.Tensor | None:
    if loss is None:
        if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            raise ValueError("Missing loss.")
        return None
    check_is_tensor(loss, "loss")
    assert isinstance(loss, tf.Tensor)
    # tensorflow_estimator's rule (model_fn.py): a shape of one element, or of elements not
    # known yet (e.g. [None]), is accepted and reshaped to a scalar.
    shape = loss.shape
    if shape.num_elements() not in (None, 1):
        raise ValueError(f"Loss must be scalar, given: {loss}")
    if not shape.is_compatible_with(tf.TensorShape([])):
        return tf.reshape(loss, [])
    return loss


def validate_predictions(predictions: object, mode: str) -> object:
    if predictions is None:
        if mode == ModeKeys.PREDICT:
            raise ValueError("Missing predictions.")
        return {}
    if isinstance(predictions, Mapping):
        for key, value in predictions.items():
            check_is_tensor(value, f"predictions[{key}]")
        return dict(predictions)
    check_is_tensor(predictions, "predictions")
    return predictions


def validate_hooks(hooks: Any) -> tuple[Any, ...]:
    """The hooks of a spec (tensorflow_estimator's _validate_estimator_spec_hooks)."""
    hooks = tuple(hooks or ())
    for hook in hooks:
        if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {hook}")
    return hooks


def check_hooks_type(hooks: Any) -> list[Any]:
    """The hooks given to train/evaluate/predict (the stock Estimator's _check_hooks_type)."""
    hooks = list(hooks or [])
    for hook in hooks:
        if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
            raise TypeError(f"Hooks must be a SessionRunHook, given: {hook}")
    return hooks


def validate_eval_metric_ops(eval_metric_ops: object) -> dict[str, Any]:
    if eval_metric_ops is None:
        return {}
    if not isinstance(eval_metric_ops, Mapping):
        raise TypeError(f"eval_metric_ops must be a dict, given: {eval_metric_ops}")
    for key, value in eval_metric_ops.items():
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError(
                "Values of eval_metric_ops must be (metric_value, update_op) tuples, given: "
                f"{value} for key: {key}"
            )
    return dict(eval_metric_ops)


def validate_function_call_spec(call_spec: object, name: str, allow_dict_arg: bool = False) -> None:
    """`host_call`/`eval_metrics`: (function, tensors); the original's checks and messages."""
    if call_spec is None:
        return
    if not isinstance(call_spec, tuple):
        raise TypeError(f"`{name}` must be a tuple")
    if len(call_spec) != 2:
        raise ValueError(f"`{name}` must have two elements")
    if not callable(call_spec[0]):
        raise TypeError(f"first element in `{name}` must be callable")
    allowed: tuple[type, ...] = (list, dict) if allow_dict_arg else (list,)
    if not isinstance(call_spec[1], allowed):
        raise TypeError(
            f"second element in `{name}` must be a {' or '.join(t.__name__ for t in allowed)}"
        )


class IPUEstimatorSpec(
    collections.namedtuple(
        "IPUEstimatorSpec",
        [
            "mode",
            "predictions",
            "loss",
            "train_op",
            "eval_metric_ops",
            "eval_metrics",
            "host_call",
            "training_hooks",
            "evaluation_hooks",
            "prediction_hooks",
        ],
    )
):
    """Ops and objects returned from a `model_fn` and passed to `IPUEstimator`."""

    def __new__(
        cls,
        mode: str,
        predictions: object = None,
        loss: object = None,
        train_op: object = None,
        eval_metric_ops: object = None,
        eval_metrics: tuple[Callable[..., Any], Any] | None = None,
        host_call: tuple[Callable[..., Any], Any] | None = None,
        training_hooks: object = None,
        evaluation_hooks: object = None,
        prediction_hooks: object = None,
    ) -> IPUEstimatorSpec:
        # In the original's order (ipu_estimator.py IPUEstimatorSpec.__new__).
        train_op = validate_train_op(train_op, mode)
        loss = validate_loss(loss, mode)
        predictions = validate_predictions(predictions, mode)
        training_hooks = validate_hooks(training_hooks)
        evaluation_hooks = validate_hooks(evaluation_hooks)
        prediction_hooks = validate_hooks(prediction_hooks)
        eval_metric_ops = validate_eval_metric_ops(eval_metric_ops)
        validate_function_call_spec(host_call, "host_call")
        validate_function_call_spec(eval_metrics, "eval_metrics", allow_dict_arg=True)
        return super().__new__(
            cls,
            mode=mode,
            predictions=predictions,
            loss=loss,
            train_op=train_op,
            eval_metric_ops=eval_metric_ops,
            eval_metrics=eval_metrics,
            host_call=host_call,
            training_hooks=training_hooks,
            evaluation_hooks=evaluation_hooks,
            prediction_hooks=prediction_hooks,
        )
