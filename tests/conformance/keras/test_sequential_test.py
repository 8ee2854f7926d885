"""Conformance: graphcore/keras `keras/ipu/sequential_test.py`.

Sequential models on one IPU: construction and its errors, compile before fit/evaluate,
an infinite dataset needs `steps_per_epoch`, building, the history of fit (one value per
epoch, floats; equal to stock Keras's with a TF1 optimizer), fitting twice (the loss and
the weights move on), evaluate and predict against stock Keras, tensors and numpy data
(the partial batch refused), and float64 data (autocast with v2 dtype behaviour).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from single_ipu_checks import assert_close, stock
from tf_keras.src.engine import base_layer_utils


def _dataset(length=None, batch_size=1, x_val=1.0, y_val=0.2, dtype=np.float32):
    x = tf.constant(x_val, shape=[32], dtype=dtype)
    y = tf.constant(y_val, shape=[2], dtype=dtype)
    dataset = tf.data.Dataset.from_tensors((x, y)).repeat(length)
    return dataset.batch(batch_size, drop_remainder=True)


def _inference_dataset(length=None, batch_size=1, x_val=1.0, dtype=np.float32):
    x = tf.constant(x_val, shape=[32], dtype=dtype)
    return tf.data.Dataset.from_tensors(x).repeat(length).batch(batch_size, drop_remainder=True)


def _simple_model():
    return [keras.layers.Dense(4), keras.layers.Dense(8)]


def _fixed_weight_model():
    init = keras.initializers.Constant(0.1)
    return [
        keras.layers.Dense(4, name="layer0", kernel_initializer=init),
        keras.layers.Dense(2, name="layer1", kernel_initializer=init),
    ]


def _sgd():
    return keras.optimizers.SGD(learning_rate=0.001)


def _check_history(history, epochs, keys=("loss",)):
    assert list(history.history) == list(keys)
    for key in keys:
        values = history.history[key]
        assert type(values) is list and len(values) == epochs
        assert all(type(v) is float for v in values)


@pytest.mark.follows("testEmptyModelCreation")
def test_empty_model_creation():
    assert keras.Sequential([]).layers == []


@pytest.mark.follows("testModelCreation")
def test_model_creation():
    assert len(keras.Sequential(_simple_model()).layers) == 2


@pytest.mark.follows("testModelBadLayers")
def test_model_bad_layers():
    with pytest.raises(TypeError, match="The added layer must be an instance"):
        keras.Sequential([[keras.layers.Dense(8), keras.layers.Dense(8)]])


@pytest.mark.follows("testMustCallCompileFit")
def test_must_call_compile_fit(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_simple_model())
        with pytest.raises(RuntimeError, match="You must compile your model before training"):
            model.fit(_dataset(length=64), verbose=0)


@pytest.mark.follows("testMustCallCompileEvaluate")
def test_must_call_compile_evaluate(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_simple_model())
        with pytest.raises(RuntimeError, match="You must compile your model before training"):
            model.evaluate(_dataset(length=64), verbose=0)


@pytest.mark.follows("testUnlimitedDatasetHasNoStepsPerEpoch")
def test_unlimited_dataset_has_no_steps_per_epoch(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_simple_model())
        model.compile("sgd", loss="mse")
        with pytest.raises(ValueError, match="When providing an infinite dataset"):
            model.fit(_dataset(), epochs=4, verbose=0)


@pytest.mark.follows("testBuildSequentialModel")
def test_build_sequential_model(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_simple_model())
        assert not model.built and not any(layer.built for layer in model.layers)
        model.build(input_shape=(4, 32))
        assert model.built and all(layer.built for layer in model.layers)


@pytest.mark.follows("testResultsOneEpochWithTfOptimizerNoAccumulation_CpuMatch")
def test_results_one_epoch_with_tf_optimizer_no_accumulation_cpu_match(strategy_on):
    def fit():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(tf.compat.v1.train.GradientDescentOptimizer(0.001), loss="mse")
        return model.fit(_dataset(length=96), verbose=0)

    with strategy_on(1).scope():
        history = fit()
    _check_history(history, 1)
    assert_close(history.history["loss"], stock(fit).history["loss"], rtol=1e-5)


@pytest.mark.follows("testFitHistoryWithKerasOptimizer")
def test_fit_history_with_keras_optimizer(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        _check_history(model.fit(_dataset(length=72), verbose=0), 1)


@pytest.mark.follows("testFitHistoryTwoEpochs")
def test_fit_history_two_epochs(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        _check_history(model.fit(_dataset(length=72), epochs=2, verbose=0), 2)


@pytest.mark.follows("testFitHistoryStepsPerEpochOneEpoch")
def test_fit_history_steps_per_epoch_one_epoch(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        _check_history(model.fit(_dataset(), steps_per_epoch=144, verbose=0), 1)


@pytest.mark.follows("testFitHistoryStepsPerEpochTwoEpochs")
def test_fit_history_steps_per_epoch_two_epochs(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        _check_history(model.fit(_dataset(), steps_per_epoch=144, epochs=2, verbose=0), 2)


@pytest.mark.follows("testFitTwice")
def test_fit_twice(strategy_on):
    with strategy_on(1).scope():
        dataset = _dataset()
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        first = model.fit(dataset, steps_per_epoch=1, verbose=0).history["loss"][0]
        weights_1 = [w.numpy() for w in model.weights]
        second = model.fit(dataset, steps_per_epoch=1, verbose=0).history["loss"][0]
        weights_2 = [w.numpy() for w in model.weights]
        third = model.fit(_dataset(), steps_per_epoch=1, verbose=0).history["loss"][0]
        weights_3 = [w.numpy() for w in model.weights]
    assert first > second > third
    for w1, w2, w3 in zip(weights_1, weights_2, weights_3, strict=True):
        assert not np.all(w1 == w2) and not np.all(w2 == w3)


@pytest.mark.follows("testFitWithMetrics")
def test_fit_with_metrics(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(keras.optimizers.SGD(0.0001), loss="mse", metrics=["accuracy"])
        history = model.fit(_dataset(), steps_per_epoch=2, epochs=2, verbose=0)
    _check_history(history, 2, keys=("loss", "accuracy"))


@pytest.mark.follows("testEval_CpuMatch")
def test_eval_cpu_match(strategy_on):
    def evaluate():
        model = keras.Sequential(_fixed_weight_model())
        model.compile("sgd", loss="mse")
        return model.evaluate(_dataset(length=96), verbose=0)

    with strategy_on(1).scope():
        result = evaluate()
    assert_close(result, stock(evaluate))


@pytest.mark.follows("testPredictBs1_CpuMatch")
@pytest.mark.follows("testPredictBs2_CpuMatch")
@pytest.mark.parametrize("batch_size", [1, 2])
def test_predict_cpu_match(strategy_on, batch_size):
    with strategy_on(1).scope():
        out = keras.Sequential(_fixed_weight_model()).predict(
            _inference_dataset(length=96, batch_size=batch_size), verbose=0
        )
    assert type(out) is np.ndarray
    assert out.shape == (96, 2)
    expected = stock(
        lambda: keras.Sequential(_fixed_weight_model()).predict(
            _inference_dataset(length=96), verbose=0
        )
    )
    assert_close(out, expected)


@pytest.mark.follows("testFitWithTensorDataPartialBatch")
def test_fit_with_tensor_data_partial_batch(strategy_on):
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        with pytest.raises(ValueError, match="The provided set of data has a partial batch"):
            model.fit(tf.constant(1.0, shape=[72, 32]), tf.constant(0.2, shape=[72, 2]))


@pytest.mark.follows("testFitWithTensorData")
@pytest.mark.follows("testFitWithNumpyData")
@pytest.mark.parametrize("as_tensor", [True, False])
def test_fit_with_tensor_or_numpy_data(strategy_on, as_tensor):
    x = np.full([72, 32], 1.0, np.single)
    y = np.full([72, 2], 0.2, np.single)
    if as_tensor:
        x, y = tf.constant(x), tf.constant(y)
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        _check_history(model.fit(x, y, batch_size=1, verbose=0), 1)


@pytest.mark.follows("testEvalWithNumpyData")
@pytest.mark.follows("testEvalWithNumpyDataBs2")
@pytest.mark.parametrize("batch_size", [1, 2])
def test_eval_with_numpy_data(strategy_on, batch_size):
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        result = model.evaluate(
            np.full([72, 32], 1.0, np.single),
            np.full([72, 2], 0.2, np.single),
            batch_size=batch_size,
            verbose=0,
        )
    # Outputs of 32 * 0.1 * 0.1 * 4 = 1.28 against 0.2: (1.08)^2.
    assert_close(result, 1.1664)


@pytest.mark.follows("testPredictWithNumpyDataBs1")
@pytest.mark.follows("testPredictWithNumpyDataBs2")
@pytest.mark.parametrize("batch_size", [1, 2])
def test_predict_with_numpy_data(strategy_on, batch_size):
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        result = model.predict(np.full([96, 32], 1.0, np.single), batch_size=batch_size, verbose=0)
    assert type(result) is np.ndarray
    assert result.shape == (96, 2)
    assert_close(result, np.full((96, 2), 1.28))


@pytest.fixture
def v2_dtype_behavior():
    """Restores Keras's dtype behaviour after a test changes it."""
    enabled = base_layer_utils.v2_dtype_behavior_enabled()
    yield
    if enabled:
        base_layer_utils.enable_v2_dtype_behavior()
    else:
        base_layer_utils.disable_v2_dtype_behavior()


@pytest.mark.follows("testAutocast_V2DtypeBehaviourTrue")
def test_autocast_v2_dtype_behaviour_true(strategy_on, v2_dtype_behavior):
    base_layer_utils.enable_v2_dtype_behavior()
    x = np.full([72, 32], 1.0, np.float64)
    y = np.full([72, 2], 0.2, np.float64)
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        model.fit(x, y, batch_size=2, verbose=0)
        predicted = model.predict(x, batch_size=2, verbose=0)
        model.evaluate(x, y, batch_size=2, verbose=0)
    assert predicted.dtype == np.float32  # float64 data autocast to the layers' float32


@pytest.mark.follows("testAutocast_V2DtypeBehaviourFalse")
def test_autocast_v2_dtype_behaviour_false(strategy_on, v2_dtype_behavior):
    base_layer_utils.disable_v2_dtype_behavior()
    with strategy_on(1).scope():
        model = keras.Sequential(_fixed_weight_model())
        model.compile(_sgd(), loss="mse")
        message = "Unsupported datatype double"
        with pytest.raises(tf.errors.FailedPreconditionError, match=message):
            model.predict(_inference_dataset(length=96, dtype=np.float64), batch_size=2)
        with pytest.raises(tf.errors.FailedPreconditionError, match=message):
            model.evaluate(_dataset(length=96, dtype=np.float64), batch_size=2)
        with pytest.raises(tf.errors.FailedPreconditionError, match=message):
            model.fit(_dataset(length=96, dtype=np.float64), batch_size=2)
