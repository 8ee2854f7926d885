"""Conformance: graphcore/keras `keras/ipu/functional_model_test.py`.

Functional models on one IPU: their inputs and outputs, compile before fit/evaluate,
infinite datasets need steps (for fit, evaluate and predict), the history of fit, fit
twice, and numbers against stock Keras: fit with a TF1 optimizer and with SGD, evaluate,
predict of numpy data (one and two outputs, 2-D and 4-D), several inputs from dicts of
datasets and of numpy arrays, several inputs and outputs with metrics.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from single_ipu_checks import assert_close, stock


def _dataset(length=None, batch_size=1, x_val=1.0, y_val=0.2):
    x = tf.constant(x_val, shape=[32])
    y = tf.constant(y_val, shape=[2])
    dataset = tf.data.Dataset.from_tensors((x, y)).repeat(length)
    return dataset.batch(batch_size, drop_remainder=True)


def _inference_dataset(length=None, batch_size=1, x_val=1.0):
    x = tf.constant(x_val, shape=[32])
    return tf.data.Dataset.from_tensors(x).repeat(length).batch(batch_size, drop_remainder=True)


def _simple_model(x, layer_sizes, w=None):
    init = keras.initializers.Constant(w) if w else "glorot_uniform"
    for n in layer_sizes:
        x = keras.layers.Dense(n, activation="relu", kernel_initializer=init)(x)
    return x


def _model(layer_sizes, w=None, outputs=1):
    inputs = keras.layers.Input(shape=(32))
    x = _simple_model(inputs, layer_sizes, w)
    return keras.Model(inputs=inputs, outputs=x if outputs == 1 else [x] * outputs)


@pytest.mark.follows("testModelCreation")
def test_model_creation():
    inputs = keras.layers.Input(shape=(2))
    y = keras.layers.Activation("relu")(_simple_model(inputs, [2, 4]))
    model = keras.Model(inputs=inputs, outputs=y)
    assert model.inputs[0].shape.as_list() == [None, 2]
    assert model.outputs[0].shape.as_list() == [None, 4]


@pytest.mark.follows("testModelCreationMultipleInput")
def test_model_creation_multiple_input():
    a, b = keras.layers.Input(shape=(2)), keras.layers.Input(shape=(2))
    joined = keras.layers.concatenate([_simple_model(a, [2, 4]), _simple_model(b, [2, 4])])
    model = keras.Model(inputs=[a, b], outputs=keras.layers.Activation("relu")(joined))
    assert [i.shape.as_list() for i in model.inputs] == [[None, 2], [None, 2]]
    assert model.outputs[0].shape.as_list() == [None, 8]


@pytest.mark.follows("testModelCreationMultipleOutput")
def test_model_creation_multiple_output():
    inputs = keras.layers.Input(shape=(2))
    x = _simple_model(inputs, [2, 4])
    outputs = [keras.layers.Activation(a)(x) for a in ("tanh", "sigmoid")]
    model = keras.Model(inputs=inputs, outputs=outputs)
    assert model.inputs[0].shape.as_list() == [None, 2]
    assert [o.shape.as_list() for o in model.outputs] == [[None, 4], [None, 4]]


@pytest.mark.follows("testMustCallCompileFit")
@pytest.mark.follows("testMustCallCompileEvaluate")
@pytest.mark.parametrize("method", ["fit", "evaluate"])
def test_must_call_compile(strategy_on, method):
    with strategy_on(1).scope():
        model = _model([8, 8])
        with pytest.raises(RuntimeError, match="You must compile your model before training"):
            getattr(model, method)(_dataset(), verbose=0)


@pytest.mark.follows("testNeedTupleDatasetFit")
@pytest.mark.follows("testNeedTupleDatasetEvaluate")
@pytest.mark.follows("testNeedNonTupleDatasetPredict")
@pytest.mark.follows("testUnlimitedDatasetHasNoStepsPerEpoch")
@pytest.mark.parametrize(
    ("method", "dataset", "kwargs"),
    [
        ("fit", _inference_dataset, {}),
        ("evaluate", _inference_dataset, {}),
        ("predict", _dataset, {}),
        ("fit", _dataset, {"epochs": 2}),
    ],
)
def test_infinite_dataset_needs_steps(strategy_on, method, dataset, kwargs):
    with strategy_on(1).scope():
        model = _model([8, 8, 2])
        model.compile("sgd", loss="mse")
        with pytest.raises(ValueError, match="When providing an infinite dataset"):
            getattr(model, method)(dataset(), verbose=0, **kwargs)


def _check_history(history, epochs):
    assert list(history.history) == ["loss"]
    assert len(history.history["loss"]) == epochs
    assert all(type(v) is float for v in history.history["loss"])


@pytest.mark.follows("testResultsOneEpochWithTfOptimizerNoAccumulation_CpuMatch")
def test_results_one_epoch_with_tf_optimizer_no_accumulation_cpu_match(strategy_on):
    def fit():
        model = _model([8, 8, 2], w=0.4)
        model.compile(tf.compat.v1.train.GradientDescentOptimizer(0.001), loss="mse")
        return model.fit(_dataset(length=96), verbose=0).history

    with strategy_on(1).scope():
        history = fit()
    assert list(history) == ["loss"] and len(history["loss"]) == 1
    assert_close(history["loss"], stock(fit)["loss"], rtol=1e-5)


@pytest.mark.follows("testFitWithTensorData")
@pytest.mark.follows("testFitWithNumpyData")
@pytest.mark.parametrize("as_tensor", [True, False])
def test_fit_with_tensor_or_numpy_data(strategy_on, as_tensor):
    x, y = np.full([72, 32], 1.0, np.single), np.full([72, 2], 0.2, np.single)
    if as_tensor:
        x, y = tf.constant(x), tf.constant(y)
    with strategy_on(1).scope():
        model = _model([8, 8, 2], w=0.4)
        model.compile(keras.optimizers.SGD(0.001), loss="mse")
        _check_history(model.fit(x, y, batch_size=1, verbose=0), 1)


@pytest.mark.follows("testEvalWithNumpyData")
@pytest.mark.follows("testEval_CpuMatch")
def test_eval_cpu_match(strategy_on):
    def evaluate():
        model = _model([8, 8, 2], w=0.4)
        model.compile("sgd", loss="mse")
        return model.evaluate(_dataset(length=96), verbose=0), model.evaluate(
            np.full([72, 32], 1.0, np.single), np.full([72, 2], 0.2, np.single), batch_size=1,
            verbose=0,
        )  # fmt: skip

    with strategy_on(1).scope():
        result = evaluate()
    assert_close(result, stock(evaluate), rtol=1e-5)


@pytest.mark.follows("testPredictWithNumpyDataBs1")
@pytest.mark.follows("testPredict_CpuMatch")
def test_predict_cpu_match(strategy_on):
    def predict():
        model = _model([8, 8, 2], w=0.4)
        return model.predict(_inference_dataset(length=96), verbose=0), model.predict(
            np.full([96, 32], 1.0, np.single), batch_size=1, verbose=0
        )

    with strategy_on(1).scope():
        ours = predict()
    assert ours[0].shape == ours[1].shape == (96, 2)
    for our_out, their_out in zip(ours, stock(predict), strict=True):
        assert_close(our_out, their_out)


@pytest.mark.follows("testFitHistoryWithKerasOptimizer")
@pytest.mark.follows("testFitHistoryTwoEpochs")
@pytest.mark.follows("testFitHistoryStepsPerEpochTwoEpochs")
@pytest.mark.parametrize(
    ("fit_kwargs", "epochs"),
    [({}, 1), ({"epochs": 2}, 2), ({"steps_per_epoch": 144, "epochs": 2}, 2)],
)
def test_fit_history(strategy_on, fit_kwargs, epochs):
    data = _dataset() if "steps_per_epoch" in fit_kwargs else _dataset(length=72)
    with strategy_on(1).scope():
        model = _model([8, 8, 2], w=0.4)
        model.compile(keras.optimizers.SGD(0.001), loss="mse")
        _check_history(model.fit(data, verbose=0, **fit_kwargs), epochs)


@pytest.mark.follows("testFitHistoryStepsPerExecution")
def test_fit_history_steps_per_execution(strategy_on):
    def fit():
        model = _model([8, 8, 2], w=0.4)
        model.compile(keras.optimizers.SGD(0.001), loss="mse", steps_per_execution=24)
        return model.fit(_dataset(length=96), epochs=2, verbose=0).history["loss"]

    with strategy_on(1).scope():
        losses = fit()
    assert_close(losses, stock(fit), rtol=1e-5)


@pytest.mark.follows("testFitTwice")
def test_fit_twice(strategy_on):
    with strategy_on(1).scope():
        model = _model([16, 8, 2], w=0.1)  # (the original's are random; these keep ReLUs alive)
        model.compile(keras.optimizers.SGD(0.001), loss="mse")
        dataset = _dataset()
        losses, weights = [], []
        for data in (dataset, dataset, _dataset()):
            losses.append(model.fit(data, steps_per_epoch=1, verbose=0).history["loss"][0])
            weights.append([w.numpy() for w in model.weights])
    assert losses[0] > losses[1] > losses[2]
    for before, after in zip(weights, weights[1:], strict=False):
        assert all(not np.all(b == a) for b, a in zip(before, after, strict=True))


@pytest.mark.follows("testFitWithMetrics")
def test_fit_with_metrics(strategy_on):
    with strategy_on(1).scope():
        model = _model([8, 8, 2], w=0.4)
        model.compile(keras.optimizers.SGD(0.0001), loss="mse", metrics=["accuracy"])
        history = model.fit(_dataset(), steps_per_epoch=2, epochs=2, verbose=0)
    assert list(history.history) == ["loss", "accuracy"]
    assert all(len(v) == 2 for v in history.history.values())


@pytest.mark.follows("testCallOrder")
def test_call_order(strategy_on):
    with strategy_on(1).scope():
        model = _model([2], w=0.4)
        model.compile(optimizer="rmsprop", loss="mse")
        before = model.evaluate(_dataset(length=96), verbose=0)
        predicted = model.predict(_inference_dataset(length=96), verbose=0)
        model.fit(_dataset(length=96), verbose=0)
        after = model.evaluate(_dataset(length=96), verbose=0)
    assert_close(predicted, np.full((96, 2), 32 * 0.4))
    assert after < before


def _check_same_history(ours, theirs):
    """The same values in the same order (the output layers' names, in the keys, differ
    between the two models built)."""
    assert len(ours) == len(theirs)
    for our_values, their_values in zip(ours.values(), theirs.values(), strict=True):
        assert_close(our_values, their_values, rtol=1e-5)


def _two_input_model():
    input_a, input_b = keras.layers.Input(shape=(32)), keras.layers.Input(shape=(16))
    joined = keras.layers.concatenate(
        [_simple_model(input_a, [8, 8], w=0.4), _simple_model(input_b, [8, 8], w=0.4)]
    )
    block_c = _simple_model(joined, [32, 2], w=0.1)
    block_d = _simple_model(joined, [32, 1], w=0.1)
    model = keras.Model(inputs=[input_a, input_b], outputs=[block_c, block_d])
    names = ([input_a.name, input_b.name], [t.name.partition("/")[0] for t in (block_c, block_d)])
    return model, names


@pytest.mark.follows("testTrainMultipleInput")
def test_train_multiple_input(strategy_on):
    def fit():
        model, (inputs, targets) = _two_input_model()
        model.compile("sgd", loss=["mse", "mse"], steps_per_execution=2)
        dataset = tf.data.Dataset.from_tensors(
            (
                {inputs[0]: tf.ones([32]), inputs[1]: tf.ones([16])},
                {targets[0]: tf.fill([2], 0.2), targets[1]: tf.fill([1], 0.2)},
            )
        )
        return model.fit(dataset.repeat(96).batch(4, drop_remainder=True), verbose=0).history

    with strategy_on(1).scope():
        history = fit()
    _check_same_history(history, stock(fit))


@pytest.mark.follows("testTrainMultipleInputMap")
def test_train_multiple_input_map(strategy_on):
    def fit():
        model, (inputs, targets) = _two_input_model()
        model.compile("sgd", loss=["mse", "mse"], metrics=["accuracy"])
        x = {inputs[0]: np.ones((96, 32), np.float32), inputs[1]: np.ones((96, 16), np.float32)}
        y = {targets[0]: np.full((96, 2), 0.2, np.float32), targets[1]: np.full((96, 1), 0.2)}
        return model.fit(x, y, batch_size=4, shuffle=False, verbose=0).history

    with strategy_on(1).scope():
        history = fit()
    _check_same_history(history, stock(fit))


def _predict_both(strategy, build):
    xs = np.stack([np.ones(32, np.float32) * i for i in range(48)])
    with strategy.scope():
        ours = build().predict(xs, batch_size=2, verbose=0)
    theirs = stock(lambda: build().predict(xs, batch_size=2, verbose=0))
    assert np.shape(ours) == np.shape(theirs)
    assert_close(ours, theirs, rtol=1e-5)


def _reshaped_model(outputs):
    inputs = keras.layers.Input(shape=(32))
    x = keras.layers.Reshape((4, 4, 3))(_simple_model(inputs, [32, 32, 48], w=1))
    return keras.Model(inputs=inputs, outputs=x if outputs == 1 else [x] * outputs)


@pytest.mark.follows("testPredictNumpyData")
def test_predict_numpy_data(strategy_on):
    _predict_both(strategy_on(1), lambda: _model([32, 32, 1], w=1))


@pytest.mark.follows("testPredictNumpyDataTwoOutput")
def test_predict_numpy_data_two_output(strategy_on):
    _predict_both(strategy_on(1), lambda: _model([32, 32, 1], w=1, outputs=2))


@pytest.mark.follows("testPredictNumpyData3D")
def test_predict_numpy_data_3d(strategy_on):
    _predict_both(strategy_on(1), lambda: _reshaped_model(1))


@pytest.mark.follows("testPredictNumpyDataTwoOutput3D")
def test_predict_numpy_data_two_output_3d(strategy_on):
    _predict_both(strategy_on(1), lambda: _reshaped_model(2))


@pytest.mark.follows("testFitVanillaKerasMatch")
def test_fit_vanilla_keras_match(strategy_on):
    def fit():
        model = _model([32, 32, 1], w=1)
        model.compile("sgd", "mse")
        return model.fit(_dataset(length=96, y_val=0.2), epochs=2, verbose=0).history["loss"]

    with strategy_on(1).scope():
        losses = fit()
    assert_close(losses, stock(fit), rtol=1e-5)


@pytest.mark.follows("testTrainMultipleInputMultipleOutput")
def test_train_multiple_input_multiple_output(strategy_on):
    def fit():
        ones = np.ones(32, np.float64)
        ds_x = tf.data.Dataset.from_tensors((ones, ones, ones))
        ds_y = tf.data.Dataset.from_tensors((np.ones(1), np.ones(1)))
        data = tf.data.Dataset.zip((ds_x, ds_y)).repeat(32).batch(4, drop_remainder=True)
        inputs = [keras.Input(32) for _ in range(3)]
        init = keras.initializers.Constant(1)
        dense_1 = keras.layers.Dense(16, kernel_initializer=init, activation="relu")(inputs[0])
        dense_2 = keras.layers.Dense(16, kernel_initializer=init, activation="relu")(inputs[1])
        cat = keras.layers.Concatenate()([dense_1, dense_2, inputs[2]])
        outputs = [
            keras.layers.Dense(1, kernel_initializer=init, activation="relu", name=name)(cat)
            for name in ("output1", "output2")
        ]
        model = keras.Model(inputs, outputs)
        model.compile("sgd", ["mse", "mse"], metrics=["accuracy"])
        return model.fit(data, steps_per_epoch=1, epochs=2, verbose=0).history

    with strategy_on(1).scope():
        history = fit()
    expected = stock(fit)
    assert history.keys() == expected.keys()
    for key in ("output1_loss", "output2_loss", "output1_accuracy", "output2_accuracy"):
        assert key in history
    for key in history:
        assert_close(history[key], expected[key], rtol=1e-5)


@pytest.mark.follows("testAutocast_ComplexDatasetStructure")
def test_autocast_complex_dataset_structure(strategy_on):
    ones = np.ones(32, np.float64)
    ds_x = tf.data.Dataset.from_tensors((ones, ones, ones))
    ds_y = tf.data.Dataset.from_tensors((np.ones(1), np.ones(1)))
    ds_xy = tf.data.Dataset.zip((ds_x, ds_y)).repeat(32).batch(4, drop_remainder=True)
    ds_x_tuple = tf.data.Dataset.zip((ds_x,)).repeat(32).batch(4, drop_remainder=True)
    with strategy_on(1).scope():
        inputs = [keras.Input(32) for _ in range(3)]
        init = keras.initializers.Constant(1)
        dense = [
            keras.layers.Dense(16, kernel_initializer=init, activation="relu")(x)
            for x in inputs[:2]
        ]
        cat = keras.layers.Concatenate()([*dense, inputs[2]])
        outputs = [
            keras.layers.Dense(1, kernel_initializer=init, activation="relu")(cat) for _ in range(2)
        ]
        model = keras.Model(inputs, outputs)
        model.compile(keras.optimizers.SGD(0.001), loss="mse")
        model.fit(ds_xy, verbose=0)  # float64 data of nested structure, autocast
        predicted = model.predict(ds_x_tuple, verbose=0)
        model.evaluate(ds_xy, verbose=0)
    assert [p.shape for p in predicted] == [(32, 1), (32, 1)]
    assert all(p.dtype == np.float32 for p in predicted)


@pytest.mark.follows("testUint8")
def test_uint8(strategy_on):
    dataset = tf.data.Dataset.from_tensor_slices(np.array(range(30)))
    dataset = dataset.map(lambda x: tf.cast(x, dtype=np.uint8))
    dataset = dataset.batch(1, drop_remainder=True).batch(1, drop_remainder=True)
    strategy = strategy_on(1)
    with strategy.scope():
        i = keras.layers.Input(shape=[1])
        ci = keras.layers.Lambda(lambda x: tf.cast(x, dtype=np.float16))(i)
        model = keras.Model(i, keras.layers.Dense(1, kernel_initializer="ones")(ci))
        model.compile(steps_per_execution=10)
        output = model.predict(dataset, verbose=0)
    assert_close(output.flatten(), range(30))


def _three_inputs():
    return tuple(np.ones((64, 32), np.float32) for _ in range(3))


def _multi_output_model(heads):
    """Three inputs, two through Dense(16) layers, concatenated; `heads(cat)` the outputs."""
    inputs = tuple(keras.Input(32) for _ in range(3))
    init = keras.initializers.Constant(1)
    dense = [
        keras.layers.Dense(16, kernel_initializer=init, activation="relu")(x) for x in inputs[:2]
    ]
    cat = keras.layers.Concatenate()([*dense, inputs[2]])

    def head(units):
        return keras.layers.Dense(units, kernel_initializer=init, activation="relu")(cat)

    return keras.Model(inputs, heads(head))


def _check_predictions_match_stock(strategy, heads, losses):
    def predict():
        model = _multi_output_model(heads)
        model.compile("sgd", ["mse"] * losses)
        return model.predict(_three_inputs(), batch_size=4, verbose=0)

    with strategy.scope():
        ours = predict()
    theirs = stock(predict)
    for our_out, their_out in zip(tf.nest.flatten(ours), tf.nest.flatten(theirs), strict=True):
        assert_close(our_out, their_out)
    return ours


@pytest.mark.follows("testPredictMultipleOutput")
def test_predict_multiple_output(strategy_on):
    ours = _check_predictions_match_stock(strategy_on(1), lambda head: (head(1), head(1)), 2)
    assert [o.shape for o in ours] == [(64, 1), (64, 1)]


@pytest.mark.follows("testPredictMultipleOutputDifferentShapes")
def test_predict_multiple_output_different_shapes(strategy_on):
    ours = _check_predictions_match_stock(
        strategy_on(1), lambda head: (head(1), (head(2), head(2))), 3
    )
    assert [o.shape for o in tf.nest.flatten(ours)] == [(64, 1), (64, 2), (64, 2)]


@pytest.mark.follows("testNestedClasses")
def test_nested_classes(strategy_on):
    init = keras.initializers.Constant(1)

    class MyDenseModel(keras.Model):
        def __init__(self, units):
            super().__init__()
            self.dense1 = keras.layers.Dense(units, kernel_initializer=init, activation="relu")
            self.dense2 = keras.layers.Dense(units, kernel_initializer=init, activation="softmax")

        def call(self, inputs):
            in0, in1 = inputs
            return self.dense1(in0), self.dense2(in1)

    class MyLayer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.concat = keras.layers.Concatenate()
            self.dense1 = keras.layers.Dense(1, kernel_initializer=init, activation="relu")
            self.dense2 = keras.layers.Dense(3, kernel_initializer=init, activation="softmax")

        def call(self, inputs):
            cat = self.concat(inputs)
            return ((self.dense1(cat),), self.dense2(cat))

    def fit():
        inputs = [keras.Input(32) for _ in range(3)]
        dense_1, dense_2 = MyDenseModel(16)(inputs[:2])
        output = MyLayer()([dense_1, dense_2, inputs[2]])
        model = keras.Model(inputs, (output[0][0], output[1]))
        model.compile("sgd", ["mse", "mse"])
        y = (np.ones((64, 1), np.float32), np.ones((64, 3), np.float32))
        return model.fit(_three_inputs(), y, batch_size=4, shuffle=False, verbose=0).history

    with strategy_on(1).scope():
        history = fit()
    assert_close(history["loss"], stock(fit)["loss"], rtol=1e-5)
