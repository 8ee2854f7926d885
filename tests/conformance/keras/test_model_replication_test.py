"""Conformance: graphcore/keras `keras/ipu/model_replication_test.py`.

Replicated (2 replicas) functional models: predict with numpy data returns every
sample (also when the last execution is short, and with `steps`), multi-output
predictions equal stock Keras's, and metrics reduce across replicas as
`set_replication_options` says (NONE, LIST, SUM, MEAN), against the original's
per-replica CPU computation.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tf_keras.ipu import ReplicatedMetricReductionMethod


def _two_dense_model():
    inputs = keras.layers.Input(shape=(32), dtype=np.single, batch_size=2)
    init = keras.initializers.Constant(0.1)
    x = keras.layers.Dense(4, name="layer0", kernel_initializer=init)(inputs)
    x = keras.layers.Dense(2, name="layer1", kernel_initializer=init)(x)
    return keras.Model(inputs, x)


# Every output is the same: ones through constant weights of 0.1 (with zero biases).
EXPECTED_ROW = np.full(2, 32 * 0.1 * 0.1 * 4, np.float32)


@pytest.mark.follows("testPredictWithNumpyDataBs2Replicas2")
def test_predict_with_numpy_data_bs2_replicas2(strategy_on):
    strategy = strategy_on(2)
    with strategy.scope():
        model = _two_dense_model()
        model.compile("sgd", loss="mse", steps_per_execution=24)
        result = model.predict(np.ones([96, 32], np.single), batch_size=2, verbose=0)
    assert type(result) is np.ndarray
    assert result.shape == (96, 2)
    np.testing.assert_allclose(result, np.broadcast_to(EXPECTED_ROW, (96, 2)), rtol=1e-6)


@pytest.mark.follows("testPredictWithNumpyDataBs2Replicas2Ga3DropsSamples")
def test_predict_with_numpy_data_bs2_replicas2_ga3_drops_samples(strategy_on):
    strategy = strategy_on(2)
    with strategy.scope():
        model = _two_dense_model()
        model.compile("sgd", loss="mse", steps_per_execution=3)
        result = model.predict(np.ones([60, 32], np.single), batch_size=2, verbose=0)
    assert result.shape[0] == 60


@pytest.mark.follows("testPredictWithNumpyDataBs2Replicas2Steps2Ga1")
def test_predict_with_numpy_data_bs2_replicas2_steps2_ga1(strategy_on):
    strategy = strategy_on(2)
    with strategy.scope():
        model = _two_dense_model()
        model.compile(keras.optimizers.SGD(0.001), loss="mse", steps_per_execution=2)
        result = model.predict(np.ones([96, 32], np.single), batch_size=2, steps=2, verbose=0)
    assert type(result) is np.ndarray
    assert result.shape == (4, 2)
    np.testing.assert_allclose(result, np.broadcast_to(EXPECTED_ROW, (4, 2)), rtol=1e-6)


def _multi_output_model(second_units):
    inputs = [keras.Input(32) for _ in range(3)]
    init = keras.initializers.Constant(1)
    dense_1 = keras.layers.Dense(16, kernel_initializer=init, activation="relu")(inputs[0])
    dense_2 = keras.layers.Dense(16, kernel_initializer=init, activation="relu")(inputs[1])
    cat = keras.layers.Concatenate()([dense_1, dense_2, inputs[2]])
    out_1 = keras.layers.Dense(1, kernel_initializer=init, activation="relu")(cat)
    out_2 = keras.layers.Dense(second_units, kernel_initializer=init, activation="relu")(cat)
    model = keras.Model(tuple(inputs), (out_1, out_2))
    model.compile("sgd", ["mse", "mse"], steps_per_execution=2)
    return model


def _check_multi_output(strategy_on, second_units):
    data = tuple(np.ones((64, 32), np.float32) for _ in range(3))
    cpu = _multi_output_model(second_units).predict(data, batch_size=4, verbose=0)
    strategy = strategy_on(2)
    with strategy.scope():
        ipu_out = _multi_output_model(second_units).predict(data, batch_size=4, verbose=0)
    for ours, theirs in zip(ipu_out, cpu, strict=True):
        assert ours.shape == theirs.shape
        np.testing.assert_almost_equal(ours, theirs)


@pytest.mark.follows("testPredictMultipleOutputReplicas2")
def test_predict_multiple_output_replicas2(strategy_on):
    _check_multi_output(strategy_on, 1)


@pytest.mark.follows("testPredictMultipleOutputDifferentShapesReplicas2")
def test_predict_multiple_output_different_shapes_replicas2(strategy_on):
    _check_multi_output(strategy_on, 2)


def _metrics_on_cpu(x, y, metrics, replicas, method):
    """The original's `calculate_metrics_cpu`: each replica's metrics over its samples
    (replica r had samples r, r + R, ...), then reduced as the method says."""
    x, y = np.array(x), np.array(y)
    x = np.stack(np.split(x, len(x) // replicas), axis=1)
    y = np.stack(np.split(y, len(y) // replicas), axis=1)
    results = [[m(y[r], x[r]).numpy() for r in range(replicas)] for m in metrics]
    if method == ReplicatedMetricReductionMethod.NONE:
        return [r[-1] for r in results]
    if method == ReplicatedMetricReductionMethod.LIST:
        return results
    if method == ReplicatedMetricReductionMethod.SUM:
        return [np.sum(r) for r in results]
    return [np.mean(r) for r in results]


@pytest.mark.follows("testMetricReduction")
@pytest.mark.parametrize("method", list(ReplicatedMetricReductionMethod))
def test_metric_reduction(strategy_on, method):
    x = [0.0, 0.0, 0.0, 0.0]
    y = [1.0, 2.0, 3.0, 4.0]
    loss, metrics = tf.keras.metrics.MAE, [tf.keras.metrics.MSE]
    expected = _metrics_on_cpu(x, y, [loss, *metrics], 2, method)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(1, drop_remainder=True)
    strategy = strategy_on(2)
    with strategy.scope():
        inputs = keras.Input(shape=1)
        outputs = keras.layers.Dense(
            1, kernel_initializer="zeros", use_bias=False, trainable=False
        )(inputs)
        model = keras.Model(inputs, outputs)
        model.build(input_shape=(1, 1))
        model.compile(loss=loss, metrics=metrics, steps_per_execution=4)
        model.set_replication_options(replicated_metric_reduction_method=method)
        actual = model.evaluate(dataset, steps=4, verbose=0)
    for i in range(len(metrics)):
        np.testing.assert_array_equal(actual[i], expected[i])
