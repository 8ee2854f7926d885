"""Conformance: graphcore/keras `keras/ipu/extensions/single_ipu/metrics_correctness_test.py`.

Losses and metrics (plain and weighted) of a two-input two-output model of fixed weights
inside an IPUStrategy, with and without sample weights (for both outputs or one), from
fit, evaluate, train_on_batch and test_on_batch, against the original's values worked
out by hand (predictions 3x; e.g. the weighted mean squared error of the first output is
280 / 20 = 14).
"""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras
from single_ipu_checks import MODEL_TYPES, assert_close, model_from_layers

pytestmark = pytest.mark.usefixtures("ipu_scope")

X = np.asarray([[1.0], [2.0], [3.0], [4.0], [5.0]])
Y1 = 2 * X
Y2 = X
SAMPLE_WEIGHT_1 = np.asarray([2.0, 3.0, 4.0, 5.0, 6.0])
SAMPLE_WEIGHT_2 = np.asarray([3.5, 2.5, 1.5, 0.5, 3.0])
BOTH_WEIGHTED = {"output_1": SAMPLE_WEIGHT_1, "output_2": SAMPLE_WEIGHT_2}
SECOND_WEIGHTED = {"output_2": SAMPLE_WEIGHT_2}

WMSE = "mean_squared_error_2"
# In the order of the results: the loss, the outputs' losses, then per output its mean
# squared error and its weighted one.
BATCH_RESULT = [55, 11, 44, 11, 11, 44, 44]
BATCH_RESULT_WITH_WEIGHTS = [144, 56, 88, 11, 14, 44, 40]
BATCH_RESULT_WITH_WEIGHTS_OUTPUT_2 = [99, 11, 88, 11, 11, 44, 40]
KEYS = [
    "loss", "output_1_loss", "output_2_loss", "output_1_mean_squared_error",
    f"output_1_{WMSE}", "output_2_mean_squared_error", f"output_2_{WMSE}",
]  # fmt: skip


def _model():
    inputs = [keras.Input(shape=(1,), name=f"input_{i}") for i in (1, 2)]
    shared = keras.layers.Dense(3, kernel_initializer="ones", trainable=False)
    outputs = [
        keras.layers.Dense(1, kernel_initializer="ones", name=f"output_{i}", trainable=False)(
            shared(x)
        )
        for i, x in zip((1, 2), inputs, strict=True)
    ]
    model = keras.Model(inputs, outputs)
    return _compiled(model)


def _compiled(model):
    """Compiled as both of the original's classes compile: a plain and a weighted MSE."""
    model.compile(
        optimizer="rmsprop",
        loss="mse",
        metrics=[keras.metrics.MeanSquaredError(name="mean_squared_error")],
        weighted_metrics=[keras.metrics.MeanSquaredError(name=WMSE)],
    )
    return model


def _check_history(history, expected_batch_result):
    for key, value in zip(KEYS, expected_batch_result, strict=True):
        assert_close(history.history[key], [value, value], rtol=1e-3)


def _fit(model, sample_weight=None, class_weight=None):
    return model.fit(
        [X, X],
        [Y1, Y2],
        sample_weight=sample_weight,
        class_weight=class_weight,
        batch_size=5,
        epochs=2,
        shuffle=False,
        verbose=0,
    )


@pytest.mark.follows("test_fit")
def test_fit():
    _check_history(_fit(_model()), BATCH_RESULT)


@pytest.mark.follows("test_fit_with_sample_weight")
def test_fit_with_sample_weight():
    model = _model()
    _check_history(_fit(model, BOTH_WEIGHTED), BATCH_RESULT_WITH_WEIGHTS)
    _check_history(_fit(model, SECOND_WEIGHTED), BATCH_RESULT_WITH_WEIGHTS_OUTPUT_2)


@pytest.mark.follows("test_eval")
def test_eval():
    result = _model().evaluate([X, X], [Y1, Y2], batch_size=5, verbose=0)
    assert_close(result, BATCH_RESULT, rtol=1e-3)


@pytest.mark.follows("test_eval_with_sample_weight")
@pytest.mark.slow
def test_eval_with_sample_weight():
    def evaluate(sample_weight):
        return _model().evaluate(
            [X, X], [Y1, Y2], batch_size=5, sample_weight=sample_weight, verbose=0
        )

    assert_close(evaluate(BOTH_WEIGHTED), BATCH_RESULT_WITH_WEIGHTS, rtol=1e-3)
    assert_close(evaluate(SECOND_WEIGHTED), BATCH_RESULT_WITH_WEIGHTS_OUTPUT_2, rtol=1e-3)
    # The weighted metric does not depend on the batch size.
    model = _model()
    x, y, w = np.random.random((50, 1)), np.random.random((50, 1)), np.random.random((50,))
    mse = [
        model.evaluate([x, x], [y, y], sample_weight=[w, w], batch_size=b, verbose=0)[4]
        for b in (5, 10)
    ]
    assert_close(mse[0], mse[1], rtol=1e-3)
    expected = np.sum(w * (3 * x[:, 0] - y[:, 0]) ** 2) / np.sum(w)
    assert_close(mse[0], expected, rtol=1e-4)


@pytest.mark.follows("test_train_on_batch")
def test_train_on_batch():
    assert_close(_model().train_on_batch([X, X], [Y1, Y2]), BATCH_RESULT, rtol=1e-3)


@pytest.mark.follows("test_train_on_batch_with_sample_weight")
def test_train_on_batch_with_sample_weight():
    model = _model()
    result = model.train_on_batch([X, X], [Y1, Y2], sample_weight=BOTH_WEIGHTED)
    assert_close(result, BATCH_RESULT_WITH_WEIGHTS, rtol=1e-3)
    result = model.train_on_batch([X, X], [Y1, Y2], sample_weight=SECOND_WEIGHTED)
    assert_close(result, BATCH_RESULT_WITH_WEIGHTS_OUTPUT_2, rtol=1e-3)


@pytest.mark.follows("test_test_on_batch")
def test_test_on_batch():
    assert_close(_model().test_on_batch([X, X], [Y1, Y2]), BATCH_RESULT, rtol=1e-3)


@pytest.mark.follows("test_test_on_batch_with_sample_weight")
def test_test_on_batch_with_sample_weight():
    model = _model()
    result = model.test_on_batch([X, X], [Y1, Y2], sample_weight=BOTH_WEIGHTED)
    assert_close(result, BATCH_RESULT_WITH_WEIGHTS, rtol=1e-3)
    result = model.test_on_batch([X, X], [Y1, Y2], sample_weight=SECOND_WEIGHTED)
    assert_close(result, BATCH_RESULT_WITH_WEIGHTS_OUTPUT_2, rtol=1e-3)


# The original's TestMetricsCorrectnessSingleIO: one input, one output, every model type;
# y_true = 2x, predictions 3x. Class weights keyed by the (integer-valued) targets weigh
# the samples as the sample weights [2, 3, 4, 5] do: weighted metric 130 / 14 = 9.286,
# loss 130 / 4 = 32.5.
SINGLE_X = np.asarray([[1.0], [2.0], [3.0], [4.0]])
SINGLE_Y = 2 * SINGLE_X
CLASS_WEIGHT = {**{i: 1 for i in range(10)}, 2: 2, 4: 3, 6: 4, 8: 5}
SINGLE_RESULT_WITH_WEIGHTS = {"loss": 32.5, "mean_squared_error": 7.5, WMSE: 9.286}


def _single_io_model(model_type):
    layers = [
        keras.layers.Dense(3, kernel_initializer="ones", trainable=False),
        keras.layers.Dense(1, kernel_initializer="ones", name="output", trainable=False),
    ]
    model = model_from_layers(layers, (1,), model_type)
    return _compiled(model)


@pytest.mark.follows("test_fit_with_class_weight")
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_fit_with_class_weight(model_type):
    history = _single_io_model(model_type).fit(
        SINGLE_X,
        SINGLE_Y,
        class_weight=CLASS_WEIGHT,
        batch_size=2,
        epochs=2,
        shuffle=False,
        verbose=0,
    )
    for key, value in SINGLE_RESULT_WITH_WEIGHTS.items():
        assert_close(history.history[key], [value, value], rtol=1e-3)


@pytest.mark.follows("test_train_on_batch_with_class_weight")
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_train_on_batch_with_class_weight(model_type):
    result = _single_io_model(model_type).train_on_batch(
        SINGLE_X, SINGLE_Y, class_weight=CLASS_WEIGHT
    )
    assert_close(result, list(SINGLE_RESULT_WITH_WEIGHTS.values()), rtol=1e-3)
