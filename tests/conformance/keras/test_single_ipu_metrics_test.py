"""Conformance: graphcore/keras `keras/ipu/extensions/single_ipu/metrics_test.py`.

Stock Keras metrics inside an IPUStrategy: each `evaluate` starts its metrics from zero,
so a second evaluation of the same data leaves the same counts (confusion counts,
precision, recall, AUC with computed and with given thresholds). The original runs each
scenario on the three kinds of model; here each runs on one, the kinds in turn.
"""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras
from single_ipu_checks import MODEL_TYPES, model_from_layers

pytestmark = pytest.mark.usefixtures("ipu_scope")


def _evaluate_twice(model_type, metric, x, y):
    """The model of ones of the original (relu Dense, sigmoid Dense), evaluated twice; the
    metric's variables after each evaluation."""
    layers = [
        keras.layers.Dense(3, activation="relu", kernel_initializer="ones"),
        keras.layers.Dense(1, activation="sigmoid", kernel_initializer="ones"),
    ]
    model = model_from_layers(layers, (4,), model_type)
    model.compile(loss="mae", metrics=[metric], optimizer="rmsprop")
    states = []
    for _ in range(2):
        model.evaluate(x, y, verbose=0)
        states.append({v.name.split("/")[-1].split(":")[0]: v.numpy() for v in metric.variables})
    return states


def _halves(first, second, rows=64):
    return np.concatenate((first((rows, 4)), second((rows, 4))))


@pytest.mark.follows("test_reset_states_false_positives")
@pytest.mark.parametrize("model_type", [MODEL_TYPES[0]])
def test_reset_states_false_positives(model_type):
    states = _evaluate_twice(
        model_type, keras.metrics.FalsePositives(), np.ones((128, 4)), np.zeros((128, 1))
    )
    assert [s["accumulator"][0] for s in states] == [128.0, 128.0]


@pytest.mark.follows("test_reset_states_false_negatives")
@pytest.mark.parametrize("model_type", [MODEL_TYPES[1]])
def test_reset_states_false_negatives(model_type):
    states = _evaluate_twice(
        model_type, keras.metrics.FalseNegatives(), np.zeros((128, 4)), np.ones((128, 1))
    )
    assert [s["accumulator"][0] for s in states] == [128.0, 128.0]


@pytest.mark.follows("test_reset_states_true_negatives")
@pytest.mark.parametrize("model_type", [MODEL_TYPES[2]])
def test_reset_states_true_negatives(model_type):
    states = _evaluate_twice(
        model_type, keras.metrics.TrueNegatives(), np.zeros((128, 4)), np.zeros((128, 1))
    )
    assert [s["accumulator"][0] for s in states] == [128.0, 128.0]


@pytest.mark.follows("test_reset_states_true_positives")
@pytest.mark.parametrize("model_type", [MODEL_TYPES[0]])
def test_reset_states_true_positives(model_type):
    states = _evaluate_twice(
        model_type, keras.metrics.TruePositives(), np.ones((128, 4)), np.ones((128, 1))
    )
    assert [s["accumulator"][0] for s in states] == [128.0, 128.0]


@pytest.mark.follows("test_reset_states_precision")
@pytest.mark.parametrize("model_type", [MODEL_TYPES[1]])
def test_reset_states_precision(model_type):
    x = _halves(np.ones, np.ones)
    y = np.concatenate((np.ones((64, 1)), np.zeros((64, 1))))
    states = _evaluate_twice(model_type, keras.metrics.Precision(), x, y)
    for state in states:
        assert state["true_positives"][0] == 64.0
        assert state["false_positives"][0] == 64.0


@pytest.mark.follows("test_reset_states_recall")
@pytest.mark.parametrize("model_type", [MODEL_TYPES[2]])
def test_reset_states_recall(model_type):
    x = _halves(np.ones, np.zeros)
    y = np.ones((128, 1))
    states = _evaluate_twice(model_type, keras.metrics.Recall(), x, y)
    for state in states:
        assert state["true_positives"][0] == 64.0
        assert state["false_negatives"][0] == 64.0


def _auc_data():
    x = np.concatenate([f((32, 4)) for f in (np.ones, np.zeros, np.zeros, np.ones)])
    y = np.concatenate([f((32, 1)) for f in (np.ones, np.zeros, np.ones, np.zeros)])
    return x, y


def _check_auc(states):
    for state in states:
        for name in ("true_positives", "false_positives", "false_negatives", "true_negatives"):
            assert state[name][1] == 32.0, name


@pytest.mark.follows("test_reset_states_auc")
@pytest.mark.parametrize("model_type", [MODEL_TYPES[0]])
def test_reset_states_auc(model_type):
    _check_auc(_evaluate_twice(model_type, keras.metrics.AUC(num_thresholds=3), *_auc_data()))


@pytest.mark.follows("test_reset_states_auc_manual_thresholds")
@pytest.mark.parametrize("model_type", [MODEL_TYPES[1]])
def test_reset_states_auc_manual_thresholds(model_type):
    _check_auc(_evaluate_twice(model_type, keras.metrics.AUC(thresholds=[0.5]), *_auc_data()))
