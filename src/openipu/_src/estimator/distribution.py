"""Training an estimator's model across workers (`RunConfig(train_distribute=...)`).

What the stock Estimator does for a between-graph strategy (its distributed training,
which the original's IPUEstimator runs through): the graph is built in the strategy's
scope, the model_fn in its replica context (variables are mirrored and start from the
chief's values, an optimizer all-reduces its gradients across the workers and scales
a mean loss by the workers), the input_fn gets the worker's `input_context`
(tensorflow/python/ipu/ipu_estimator.py `_get_input_context`), the reported loss is
reduced across the workers (`reported_loss`), and the session runs on `RunConfig.master` with the
strategy's session configuration.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2

from openipu._src.distributed.multi_worker_strategy import IPUMultiWorkerStrategyV1

T = TypeVar("T")


@contextlib.contextmanager
def strategy_scope(strategy: Any) -> Iterator[None]:
    """The strategy's scope, or nothing without a strategy.

    As the stock Estimator's, an optimizer in it scales a mean loss by the replicas
    (`get_loss_reduction()` is MEAN), so the summed gradients are their mean.
    """
    if strategy is None:
        yield
        return
    with strategy.scope(), strategy._scale_loss_for_estimator_enabled():  # noqa: SLF001
        yield


def input_context(strategy: Any) -> tf.distribute.InputContext | None:
    """The worker's input pipeline (the original passes it with IPUMultiWorkerStrategy only)."""
    if isinstance(strategy, IPUMultiWorkerStrategyV1):
        return strategy.extended._make_input_context()  # noqa: SLF001
    return None


def in_replica_context(strategy: Any, build: Callable[[], T]) -> T:
    """`build()` in the strategy's replica context (this worker's one replica)."""
    if strategy is None:
        return build()
    result: T = strategy.extended.call_for_each_replica(build)
    return result


def reported_loss(strategy: Any, loss: tf.Tensor) -> tf.Tensor:
    """The loss over the workers, reduced as the stock Estimator reports it.

    tensorflow_estimator's `_get_loss_reduce_op_for_reporting`: the strategy's loss
    reduction (MEAN in an estimator's scope) when an optimizer scaled the loss in this
    graph, else the workers' SUM. A pipeline's optimizer runs in the pipeline's own
    function graph, so the original reports a pipeline estimator's loss summed.
    """
    if strategy is None:
        return loss
    graph = tf.compat.v1.get_default_graph()
    if getattr(graph, "_is_loss_scaled_by_optimizer", False):
        reduce_op = tf.compat.v1.distribute.get_loss_reduction()
    else:
        reduce_op = tf.distribute.ReduceOp.SUM
    reduced: tf.Tensor = strategy.reduce(reduce_op, loss, axis=None)
    return reduced


def session_config(strategy: Any, config: Any) -> Any:
    """The session configuration, with what the strategy's collectives need."""
    if strategy is None:
        return config
    base = config_pb2.ConfigProto()
    if config is not None:
        base.CopyFrom(config)
    return strategy.update_config_proto(base)
