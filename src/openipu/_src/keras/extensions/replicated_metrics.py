"""Metrics of replicated Keras models: each replica's own, reduced as the model says.

On the IPU every replica keeps its own metric state, and
`set_replication_options(replicated_metric_reduction_method=...)` says what fit,
evaluate and predict report: the last replica's values (`NONE`, the default), a
list of every replica's (`LIST`), or their `SUM` or `MEAN`. openipu's replicas
are `tf.distribute` replicas whose metric variables are sync-on-read: Keras'
`Metric.result()` reads them summed over all replicas. Inside a replica, the
undecorated result function reads this replica's copy, which is what the IPU
reports.
"""

from __future__ import annotations

import enum

import tensorflow as tf
from tensorflow.python.util import nest, tf_decorator


class ReplicatedMetricReductionMethod(enum.Enum):
    """How metrics are reduced across replicas (`set_replication_options`)."""

    NONE = "NONE"
    LIST = "LIST"
    SUM = "SUM"
    MEAN = "MEAN"


def with_local_results(model, logs):
    """`logs` of one replica's step with every model metric's value read on this replica.

    Returns the logs and the names replaced (the other entries, from a custom
    step, stay as the step computed them).
    """
    if not isinstance(logs, dict):
        return logs, frozenset()
    local: dict = {}
    with tf.control_dependencies([t for t in nest.flatten(logs) if isinstance(t, tf.Tensor)]):
        for metric in model.metrics:
            result = _local_result(metric)
            if isinstance(result, dict):
                local.update(result)
            else:
                local[metric.name] = result
    replaced = {name: local[name] for name in logs if name in local}
    return {**logs, **replaced}, frozenset(replaced)


def _local_result(metric):
    """`metric.result()` without Keras' merge into cross-replica context."""
    _, target = tf_decorator.unwrap(getattr(metric.result, "__func__", metric.result))
    if target is getattr(metric.result, "__func__", None):
        return metric.result()
    return target()


def reduce_over_replicas(logs, local_names, method: ReplicatedMetricReductionMethod):
    """Logs with a leading replica axis, reduced to what the IPU would report."""
    if not isinstance(logs, dict):
        return nest.map_structure(lambda t: t[0], logs)
    reduced = {}
    for name, value in logs.items():
        if name not in local_names:
            reduced[name] = nest.map_structure(lambda t: t[0], value)  # alike on every replica
        else:
            reduced[name] = nest.map_structure(lambda t: _reduce(t, method), value)
    return reduced


def _reduce(values: tf.Tensor, method: ReplicatedMetricReductionMethod) -> tf.Tensor:
    if method is ReplicatedMetricReductionMethod.NONE:
        return values[-1]
    if method is ReplicatedMetricReductionMethod.SUM:
        return tf.reduce_sum(values, axis=0)
    if method is ReplicatedMetricReductionMethod.MEAN:
        return tf.reduce_mean(values, axis=0)
    # LIST: every replica's value; Keras' progress bar shows their mean.
    return values
