"""`set_replication_options`: every replica keeps its own metrics; the method reduces them."""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras


def _data():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    y = rng.normal(size=(64, 2)).astype(np.float32)
    return x, y


def _per_replica_metrics(model, x, y, replicas, batch_size):
    """numpy: step i of replica r has batch i * R + r; each replica averages its batches."""
    kernel, bias = model.get_weights()
    error = x @ kernel + bias - y
    batches = len(x) // batch_size
    results = []
    for replica in range(replicas):
        rows = np.concatenate(
            [
                np.arange(b * batch_size, (b + 1) * batch_size)
                for b in range(replica, batches, replicas)
            ]
        )
        results.append((np.mean(error[rows] ** 2), np.mean(np.abs(error[rows]))))
    return np.array(results)  # [replica, (loss, mae)]


def _model(strategy, method):
    with strategy.scope():
        keras.utils.set_random_seed(2)
        model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
        model.compile(keras.optimizers.SGD(0.0), "mse", metrics=["mae"], steps_per_execution=2)
        if method is not None:
            model.set_replication_options(method)
    return model


@pytest.mark.parametrize(
    "method, reduce",
    [
        (None, lambda r: r[-1]),
        ("NONE", lambda r: r[-1]),
        ("SUM", lambda r: r.sum(axis=0)),
        ("MEAN", lambda r: r.mean(axis=0)),
        (keras.ipu.ReplicatedMetricReductionMethod.MEAN, lambda r: r.mean(axis=0)),
    ],
)
def test_evaluate_reduces_each_replicas_metrics(method, reduce, strategy_on):
    x, y = _data()
    strategy = strategy_on(2)
    model = _model(strategy, method)
    with strategy.scope():
        result = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
    expected = reduce(_per_replica_metrics(model, x, y, 2, 4))
    np.testing.assert_allclose([result["loss"], result["mae"]], expected, rtol=1e-5)


def test_list_reports_every_replica_and_fit_history_uses_the_method(strategy_on):
    x, y = _data()
    strategy = strategy_on(4)
    model = _model(strategy, "LIST")
    with strategy.scope():
        history = model.fit(x, y, batch_size=2, epochs=2, verbose=0, shuffle=False)
        result = model.evaluate(x, y, batch_size=2, verbose=0, return_dict=True)
    expected = _per_replica_metrics(model, x, y, 4, 2)
    np.testing.assert_allclose(np.asarray(result["loss"]), expected[:, 0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(result["mae"]), expected[:, 1], rtol=1e-5)
    # A learning rate of 0: every epoch sees the same per-replica numbers.
    for epoch_loss in history.history["loss"]:
        np.testing.assert_allclose(np.asarray(epoch_loss), expected[:, 0], rtol=1e-5)


def test_one_replica_ignores_the_method(strategy_on):
    x, y = _data()
    strategy = strategy_on(1)
    model = _model(strategy, "SUM")
    with strategy.scope():
        result = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
    expected = _per_replica_metrics(model, x, y, 1, 4)[0]
    np.testing.assert_allclose([result["loss"], result["mae"]], expected, rtol=1e-5)


def test_bad_method_names_the_allowed_values(strategy_on):
    strategy = strategy_on(1)
    model = _model(strategy, None)
    with pytest.raises(ValueError, match="replicated_metric_reduction_method must be one of"):
        model.set_replication_options("MEDIAN")
