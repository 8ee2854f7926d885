"""Conformance: graphcore/keras `keras/ipu/extensions/single_ipu/training_test.py`.

Stock Keras training tests run inside an IPUStrategy on one IPU: the training argument
and learning phase reach the layers (loss 0 in training, 1 in validation), validation
frequency, calls refused inside a `tf.function` or before `compile`, float/int results,
layer updates and trainability, sample and class weights, masking, `add_metric` /
`add_loss` in `call`, and numbers against the same model trained by stock Keras.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from single_ipu_checks import MODEL_TYPES, assert_close, model_from_layers, small_mlp, stock
from tf_keras import backend

pytestmark = pytest.mark.usefixtures("ipu_scope")


def _train_val_datasets():
    inputs = np.ones((40, 2), np.float32)
    targets = np.ones((40, 1), np.float32)
    train = tf.data.Dataset.from_tensor_slices((inputs, targets)).batch(10, drop_remainder=True)
    val = tf.data.Dataset.from_tensor_slices((inputs, targets)).batch(10, drop_remainder=True)
    return train, val


def _fit_ones_in_training_zeros_otherwise(layer):
    model = keras.Sequential([layer])
    model.compile("sgd", loss="mae")
    train, val = _train_val_datasets()
    history = model.fit(train, epochs=2, verbose=0, validation_data=val)
    # Training outputs ones (loss 0); validation outputs zeros (loss 1).
    assert_close(history.history["loss"][0], 0.0)
    assert_close(history.history["val_loss"][0], 1.0)


@pytest.mark.follows("test_fit_training_arg")
def test_fit_training_arg():
    class ReturnTraining(keras.layers.Layer):
        def call(self, inputs, training):
            return inputs + tf.constant([100 if training else 0], "float32")

    model = keras.Sequential([ReturnTraining()])
    model.compile("sgd", "mse")
    history = model.fit(x=np.array([0.0]), y=np.array([0.0]), batch_size=1, verbose=0)
    assert_close(history.history["loss"][0], 10000)


@pytest.mark.follows("test_fit_on_empty")
def test_fit_on_empty():
    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    with pytest.raises(TypeError, match="dataset length is unknown"):
        model.fit(x=np.array([]), y=np.array([]), verbose=0)


@pytest.mark.follows("test_run_eagerly_setting")
def test_run_eagerly_setting():
    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile("sgd", "mse", run_eagerly=False)
    assert model.run_eagerly is False


@pytest.mark.follows("test_disallow_methods_inside_tf_function")
@pytest.mark.parametrize(
    "method", ["train_on_batch", "test_on_batch", "predict_on_batch", "fit", "evaluate", "predict"]
)
def test_disallow_methods_inside_tf_function(method):
    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile("sgd", "mse")

    @tf.function
    def my_fn():
        getattr(model, method)(1)

    with pytest.raises(RuntimeError, match="inside a `tf.function`"):
        my_fn()


@pytest.mark.follows("test_fit_and_validate_learning_phase")
def test_fit_and_validate_learning_phase():
    class ReturnTraining(keras.layers.Layer):
        def call(self, inputs):
            return backend.in_train_phase(
                lambda: tf.ones_like(inputs), lambda: tf.zeros_like(inputs)
            )

    _fit_ones_in_training_zeros_otherwise(ReturnTraining(input_shape=(2,)))


@pytest.mark.follows("test_fit_and_validate_training_arg")
def test_fit_and_validate_training_arg():
    class ReturnTraining(keras.layers.Layer):
        def call(self, inputs, training=None):
            return backend.in_train_phase(
                lambda: tf.ones_like(inputs), lambda: tf.zeros_like(inputs), training=training
            )

    _fit_ones_in_training_zeros_otherwise(ReturnTraining(input_shape=(2,)))


@pytest.mark.follows("test_fit_and_validate_nested_training_arg")
def test_fit_and_validate_nested_training_arg():
    class NestedReturnTraining(keras.layers.Layer):
        def call(self, inputs, training=None):
            return backend.in_train_phase(
                lambda: tf.ones_like(inputs), lambda: tf.zeros_like(inputs), training=training
            )

    class ReturnTraining(keras.layers.Layer):
        def build(self, input_shape):
            self.nested = NestedReturnTraining()
            self.built = True

        def call(self, inputs):
            return self.nested(inputs)

    _fit_ones_in_training_zeros_otherwise(ReturnTraining(input_shape=(2,)))


@pytest.mark.follows("test_target_dtype_matches_output")
# Not subclassed: stock tf_keras 2.21 no longer expands 1-D data to the (10, 1) a subclassed
# model's Dense needs (the original's Keras did, in `train_step`).
@pytest.mark.parametrize("model_type", ["sequential", "functional"])
def test_target_dtype_matches_output(model_type):
    dtypes = []

    def loss_fn(labels, preds):
        dtypes.append((labels.dtype, preds.dtype))
        return labels - preds

    layers = [keras.layers.Dense(10, dtype=np.float16), keras.layers.Dense(10, dtype=np.float16)]
    model = model_from_layers(layers, (1,), model_type)
    inputs = np.ones(10, np.float16)
    targets = np.ones(10, np.float16)
    model.compile("sgd", loss=loss_fn)
    model.train_on_batch(inputs, targets)
    model.test_on_batch(inputs, targets)
    assert model.predict(inputs, batch_size=1, verbose=0).dtype == np.float16
    assert dtypes and all(labels == preds for labels, preds in dtypes)


@pytest.mark.follows("test_validation_freq")
@pytest.mark.parametrize(
    ("validation_freq", "expected_runs"),
    [(1, 4), (2, 2), (4, 1), ([1, 3, 4], 3), ([4, 2, 2], 2)],
)
def test_validation_freq(validation_freq, expected_runs):
    x, y = np.ones((10, 10)), np.ones((10, 1))
    model = small_mlp(2, 1, 10, "functional")
    model.compile("sgd", "mse")

    class ValCounter(keras.callbacks.Callback):
        val_runs = 0

        def on_test_begin(self, logs=None):
            self.val_runs += 1

    counter = ValCounter()
    model.fit(
        x,
        y,
        epochs=4,
        validation_data=(x, y),
        validation_freq=validation_freq,
        callbacks=[counter],
        batch_size=10,
        verbose=0,
    )
    assert counter.val_runs == expected_runs


@pytest.mark.follows("test_layer_with_variable_output")
@pytest.mark.parametrize("model_type", ["subclass"])  # one kind of model (the original: all)
def test_layer_with_variable_output(model_type):
    class VariableOutputLayer(keras.layers.Layer):
        def build(self, input_shape):
            self.v = self.add_weight("output_var", shape=(2, 5), initializer="ones")

        def call(self, inputs):
            return self.v

    model = model_from_layers([VariableOutputLayer(), keras.layers.Dense(1)], (10,), model_type)
    model.compile("sgd", "mse")
    model.fit(np.ones((10, 10)), np.ones((10, 1)), batch_size=2, epochs=5, verbose=0)
    assert len(model.trainable_variables) == 3


@pytest.mark.follows("test_error_when_model_is_not_compiled")
def test_error_when_model_is_not_compiled():
    inputs = keras.Input(shape=(1,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    with pytest.raises(RuntimeError, match="must compile your model"):
        model.fit(np.ones((1, 1)), np.ones((1, 1)), verbose=0)

    class MyModel(keras.Model):
        def call(self, x):
            self.add_loss(tf.reduce_sum(x))
            return x

    with pytest.raises(RuntimeError, match="must compile your model"):
        MyModel().fit(np.random.random((32, 1)), epochs=2, verbose=0)


@pytest.mark.follows("test_outputs_are_floats")
def test_outputs_are_floats():
    x, y = np.ones((32, 1)), np.ones((32, 1))
    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile("sgd", "mse", metrics=["accuracy"])
    history = model.fit(x, y, epochs=2, verbose=0)
    assert isinstance(history.history["loss"][0], float)
    assert isinstance(history.history["accuracy"][0], float)
    for results in (
        model.train_on_batch(x, y),
        model.evaluate(x, y, verbose=0),
        model.test_on_batch(x, y),
    ):
        loss, accuracy = results
        assert isinstance(loss, float)
        assert isinstance(accuracy, float)


@pytest.mark.follows("test_int_output")
def test_int_output():
    x, y = np.ones((10, 1)), np.ones((10, 1))
    model = keras.Sequential([keras.layers.Dense(1)])

    class MyMetric(keras.metrics.Metric):
        def update_state(self, y_true, y_pred, sample_weight=None):
            del y_true, y_pred, sample_weight

        def result(self):
            return tf.constant(1, dtype="int32")

    model.compile("sgd", "mse", metrics=[MyMetric()])
    history = model.fit(x, y, epochs=2, batch_size=1, verbose=0)
    assert isinstance(history.history["my_metric"][0], int)


@pytest.mark.follows("test_trainable_state_setting")
def test_trainable_state_setting():
    class UpdateLayer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(0.0, trainable=False)

        def call(self, x):
            self.add_update(lambda: self.v.assign_add(1.0))
            return x * self.v

    layer = UpdateLayer()
    with_updates = keras.Sequential([layer])
    with_updates.compile("sgd", "mse")
    layer.trainable = False
    without_updates = keras.Sequential([layer])
    without_updates.compile("sgd", "mse")
    x, y = np.ones((10, 1)), np.ones((10, 1))
    assert layer.v.numpy() == 0.0
    with_updates.fit(x, y, batch_size=10, verbose=0)
    assert layer.v.numpy() == 1.0
    without_updates.fit(x, y, batch_size=10, verbose=0)
    assert layer.v.numpy() == 1.0


@pytest.mark.follows("test_single_input_no_tuple_wrapping")
@pytest.mark.parametrize("input_type", ["numpy_array", "dataset_array"])
def test_single_input_no_tuple_wrapping(input_type):
    x = np.ones((10, 1))
    batch_size = 5
    if input_type == "dataset_array":
        x = tf.data.Dataset.from_tensor_slices(x).batch(5, drop_remainder=True)
        batch_size = None
    seen = []

    class MyModel(keras.Model):
        def call(self, data, training=True):
            seen.append(type(data))
            return super().call(data, training=training)

    inputs = keras.Input(shape=(1,), name="my_input")
    outputs = keras.layers.Dense(1)(inputs)
    model = MyModel(inputs, outputs)
    model.add_loss(tf.reduce_sum(outputs))
    model.compile("sgd")  # the model's own loss only: there are no targets
    model.fit(x, batch_size=batch_size, verbose=0)
    model.evaluate(x, batch_size=batch_size, verbose=0)
    model.predict(x, batch_size=batch_size, verbose=0)
    assert seen and all(issubclass(t, tf.Tensor) for t in seen)


def _two_inputs_data(seed):
    rng = np.random.default_rng(seed)
    return [rng.random((10, shape), np.float32) for shape in (3, 3, 4, 4)]


def _shared_dense_model(initializer, optimizer, loss, metrics):
    """Two inputs through one Dense layer: the originals' `input_a`/`input_b` model."""
    a = keras.Input(shape=(3,), name="input_a")
    b = keras.Input(shape=(3,), name="input_b")
    dense = keras.layers.Dense(4, name="dense", kernel_initializer=initializer)
    e = keras.layers.Dropout(0.0, name="dropout")(dense(b))
    model = keras.Model([a, b], [dense(a), e])
    model.compile(optimizer, loss, metrics=metrics, loss_weights=[1.0, 0.5])
    return model


@pytest.mark.follows("test_fit_on_arrays")
def test_fit_on_arrays():
    x_a, x_b, y_d, y_e = _two_inputs_data(0)

    def build():
        return _shared_dense_model("ones", keras.optimizers.RMSprop(0.001), "mse", ["mae"])

    def run(model):
        history = model.fit(
            [x_a, x_b], [y_d, y_e], epochs=2, batch_size=5, shuffle=False, verbose=0
        )
        by_dict = model.fit(
            {"input_a": x_a, "input_b": x_b},
            [y_d, y_e],
            epochs=1,
            batch_size=5,
            shuffle=False,
            verbose=0,
        )
        return history.history, by_dict.history

    ours = run(build())
    theirs = stock(lambda: run(build()))
    for our_history, their_history in zip(ours, theirs, strict=True):
        assert our_history.keys() == their_history.keys()
        for key in our_history:
            assert_close(our_history[key], their_history[key], rtol=1e-4)


@pytest.mark.follows("test_evaluate_predict_on_arrays")
def test_evaluate_predict_on_arrays():
    x_a, x_b, y_d, y_e = _two_inputs_data(1)

    def build():
        return _shared_dense_model("glorot_uniform", "rmsprop", "mae", ["mae", "mse"])

    model = build()
    weights = model.get_weights()
    ours = model.evaluate([x_a, x_b], [y_d, y_e], batch_size=5, verbose=0)
    predicted = model.predict([x_a, x_b], batch_size=5, verbose=0)

    def reference():
        stock_model = build()
        stock_model.set_weights(weights)
        return (
            stock_model.evaluate([x_a, x_b], [y_d, y_e], batch_size=5, verbose=0),
            stock_model.predict([x_a, x_b], batch_size=5, verbose=0),
        )

    theirs, expected = stock(reference)
    assert len(ours) == len(theirs) == 7  # loss, 2 losses, 2 metrics per output
    assert_close(ours, theirs, rtol=1e-5)
    for our_out, their_out in zip(predicted, expected, strict=True):
        assert_close(our_out, their_out)


@pytest.mark.follows("test_weight_shared_across_layers")
def test_weight_shared_across_layers():
    class AddWeightLayer(keras.layers.Layer):
        def __init__(self, trainable_var, non_trainable_var):
            self.trainable_var = trainable_var
            self.non_trainable_var = non_trainable_var
            super().__init__()

        def call(self, inputs):
            return inputs + self.trainable_var

    class LayerWithWeightSharedLayers(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            shared_trainable_var = tf.Variable(1.0)
            shared_non_trainable_var = tf.Variable(1.0, trainable=False)
            self.layer1 = AddWeightLayer(shared_trainable_var, shared_non_trainable_var)
            self.layer2 = AddWeightLayer(shared_trainable_var, shared_non_trainable_var)

        def call(self, inputs):
            return self.layer2(self.layer1(inputs))

    layer = LayerWithWeightSharedLayers()
    assert len(layer._trainable_weights) == 0
    assert len(layer.trainable_weights) == 1
    assert len(layer.non_trainable_weights) == 1
    model = keras.Sequential([keras.layers.InputLayer((1,)), layer])
    model.compile("sgd", "mse")
    model.fit(np.ones((4, 1), np.float32), np.zeros((4, 1), np.float32), batch_size=4, verbose=0)
    # Loss (x + 2v)^2 = 9 at v = 1: d/dv = 4 (x + 2v) = 12; SGD(0.01) moves v to 0.88.
    assert_close(layer.trainable_weights[0].numpy(), 0.88)


@pytest.mark.follows("test_logs_passed_to_callbacks")
def test_logs_passed_to_callbacks():
    input_dim, output_dim = 5, 3
    model = small_mlp(10, output_dim, input_dim, "functional")
    model.compile("rmsprop", "mse")

    class MyCallback(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epoch_end_logs = []
            self.batch_end_logs = []

        def on_epoch_end(self, epoch, logs=None):
            self.epoch_end_logs.append(dict(logs))

        def on_batch_end(self, batch, logs=None):
            self.batch_end_logs.append(dict(logs))

    callback = MyCallback()
    x, y = np.ones((50, input_dim)), np.ones((50, output_dim))
    model.fit(x, y, batch_size=2, epochs=2, callbacks=[callback], verbose=0)
    assert len(callback.batch_end_logs) == 50
    assert len(callback.epoch_end_logs) == 2
    assert all(set(logs) == {"loss"} for logs in callback.batch_end_logs)
    assert all(set(logs) == {"loss"} for logs in callback.epoch_end_logs)


@pytest.mark.follows("test_class_weights")
def test_class_weights():
    rng = np.random.default_rng(2)
    x = rng.random((20, 4), np.float32)
    y = keras.utils.to_categorical(np.arange(20) % 3, 3)
    class_weight = {0: 1.0, 1: 2.0, 2: 4.0}

    def build():
        model = keras.Sequential(
            [
                keras.layers.Dense(
                    3, activation="softmax", kernel_initializer="ones", input_shape=(4,)
                )
            ]
        )
        model.compile(keras.optimizers.SGD(0.1), "categorical_crossentropy", metrics=["acc"])
        return model

    def run(model):
        history = model.fit(
            x, y, batch_size=5, epochs=2, class_weight=class_weight, shuffle=False, verbose=0
        )
        return history.history, model.get_weights()

    ours = run(build())
    theirs = stock(lambda: run(build()))
    for key in ours[0]:
        assert_close(ours[0][key], theirs[0][key], rtol=1e-5)
    for our_w, their_w in zip(ours[1], theirs[1], strict=True):
        assert_close(our_w, their_w, rtol=1e-5)


@pytest.mark.follows("test_default_sample_weight")
@pytest.mark.parametrize(
    "sample_weight_mode",
    [[None], ["temporal"], {"time_distributed": None}, {"time_distributed": "temporal"}, None,
     "temporal"],
)  # fmt: skip
def test_default_sample_weight(sample_weight_mode):
    """fit works without sample weights, whatever the `sample_weight_mode`."""
    model = keras.Sequential(
        [keras.layers.TimeDistributed(keras.layers.Dense(5), input_shape=(3, 5))]
    )
    x = np.random.random((10, 3, 5))
    y = np.random.random((10, 3, 5))
    optimizer = tf.compat.v1.train.RMSPropOptimizer(learning_rate=0.001)
    model.compile(optimizer, loss="mse", sample_weight_mode=sample_weight_mode)
    before = model.get_weights()[0]
    history = model.fit(x, y, epochs=1, batch_size=10, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert not np.allclose(model.get_weights()[0], before)


@pytest.mark.follows("test_masking")
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_masking(model_type):
    layers = [
        keras.layers.Masking(mask_value=0),
        keras.layers.TimeDistributed(keras.layers.Dense(1, kernel_initializer="one")),
    ]
    model = model_from_layers(layers, (2, 1), model_type)
    model.compile("sgd", "mse")
    x = np.array([[[1], [1]], [[0], [0]]], np.float32)
    y = np.array([[[1], [1]], [[1], [1]]], np.float32)
    assert model.test_on_batch(x, y) == 0


@pytest.mark.follows("test_trainable_argument")
def test_trainable_argument():
    x = np.random.random((5, 3))
    y = np.random.random((5, 2))
    model = keras.Sequential([keras.layers.Dense(2, input_dim=3, trainable=False)])
    model.compile("rmsprop", "mse")
    out = model.predict(x, batch_size=5, verbose=0)
    model.train_on_batch(x, y)
    assert_close(out, model.predict(x, batch_size=5, verbose=0))

    inputs = keras.Input(shape=(3,))
    model = keras.Model(inputs, keras.layers.Dense(2, trainable=False)(inputs))
    model.compile("rmsprop", "mse")
    out = model.predict(x, batch_size=5, verbose=0)
    model.train_on_batch(x, y)
    assert_close(out, model.predict(x, batch_size=5, verbose=0))


@pytest.mark.follows("test_model_trainability_switch")
def test_model_trainability_switch():
    model = keras.Sequential([keras.layers.Dense(2, input_dim=3)])
    assert len(model.trainable_weights) == 2
    model.trainable = False
    assert len(model.trainable_weights) == 0
    model.trainable = True
    assert len(model.trainable_weights) == 2


@pytest.mark.follows("test_gan_workflow")
def test_gan_workflow():
    shared = keras.layers.Dense(1, kernel_initializer="ones")
    a_in, b_in = keras.Input(shape=(1,)), keras.Input(shape=(1,))
    a = keras.Model(a_in, shared(a_in))
    a.compile("sgd", "mse")
    shared.trainable = False
    b = keras.Model(b_in, shared(b_in))
    b.compile("sgd", "mse")
    x, y = np.ones((4, 1)), np.zeros((4, 1))
    before = shared.get_weights()
    b.train_on_batch(x, y)
    for w0, w1 in zip(before, shared.get_weights(), strict=True):
        assert_close(w1, w0)
    a.train_on_batch(x, y)
    assert not np.allclose(shared.get_weights()[0], before[0])


@pytest.mark.follows("test_metrics_names")
def test_metrics_names():
    a = keras.Input(shape=(3,), name="input_a")
    b = keras.Input(shape=(3,), name="input_b")
    dense = keras.layers.Dense(4, name="dense")
    c = dense(a)
    d = dense(b)
    e = keras.layers.Dropout(0.5, name="dropout")(c)
    model = keras.Model([a, b], [d, e])
    model.compile(
        keras.optimizers.RMSprop(0.001),
        "mse",
        metrics=["mse", keras.metrics.BinaryAccuracy()],
        loss_weights=[1.0, 0.5],
    )
    x = np.random.random((10, 3))
    y = np.random.random((10, 4))
    model.fit([x, x], [y, y], epochs=1, batch_size=5, verbose=0)
    assert model.metrics_names == [
        "loss",
        "dense_loss",
        "dropout_loss",
        "dense_mse",
        "dense_binary_accuracy",
        "dropout_mse",
        "dropout_binary_accuracy",
    ]


@pytest.mark.follows("test_metric_state_reset_between_fit_and_evaluate")
def test_metric_state_reset_between_fit_and_evaluate():
    model = keras.Sequential(
        [keras.layers.Dense(3, activation="relu", input_dim=4), keras.layers.Dense(1)]
    )
    acc = keras.metrics.Accuracy("acc")
    model.compile("rmsprop", "mse", metrics=[acc])
    x_train, y_train = np.random.random((10, 4)), np.random.random((10, 1))
    model.fit(x_train, y_train, batch_size=5, epochs=2, verbose=0)
    assert acc.count.numpy() == 10
    x_test, y_test = np.random.random((10, 4)), np.random.random((10, 1))
    model.evaluate(x_test, y_test, batch_size=5, verbose=0)
    assert acc.count.numpy() == 10


@pytest.mark.follows("test_add_metric_with_tensor_on_model")
def test_add_metric_with_tensor_on_model():
    x = keras.Input(shape=(1,))
    y = keras.layers.Dense(1, kernel_initializer="ones")(x)
    model = keras.Model(x, y)
    model.add_metric(tf.reduce_sum(y), name="metric_1", aggregation="mean")
    model.compile("sgd", loss="mse")
    inputs = np.ones((32, 1))
    targets = np.ones((32, 1))
    history = model.fit(inputs, targets, epochs=2, batch_size=16, verbose=0)
    assert_close(history.history["metric_1"][-1], 16 * (1 - 2 * 0.01 * 0.0), rtol=0.2)
    evaluated = model.evaluate(inputs, targets, batch_size=16, verbose=0)
    # metric_1 is the sum of the batch's outputs, averaged over the batches.
    expected = np.mean(model.predict(inputs, batch_size=16, verbose=0)) * 16
    assert_close(evaluated[-1], expected, rtol=1e-5)


@pytest.mark.follows("test_add_metric_in_model_call")
def test_add_metric_in_model_call():
    class TestModel(keras.Model):
        def __init__(self):
            super().__init__(name="test_model")
            self.dense1 = keras.layers.Dense(2, kernel_initializer="ones")
            self.mean = keras.metrics.Mean(name="metric_1")

        def call(self, x):
            self.add_metric(tf.reduce_sum(x), name="metric_2", aggregation="mean")
            # Provide the same name as in the instance created in __init__ for eager mode.
            self.add_metric(self.mean(x), name="metric_1")
            return self.dense1(x)

    model = TestModel()
    model.compile(loss="mse", optimizer=keras.optimizers.SGD(0.01))
    x = np.ones(shape=(10, 1))
    y = np.ones(shape=(10, 2))
    history = model.fit(x, y, epochs=2, batch_size=5, validation_data=(x, y), verbose=0)
    assert_close(history.history["metric_1"][-1], 1.0)
    assert_close(history.history["val_metric_1"][-1], 1.0)
    assert_close(history.history["metric_2"][-1], 5.0)
    assert_close(history.history["val_metric_2"][-1], 5.0)
    evaluated = model.evaluate(x, y, batch_size=5, verbose=0)
    assert_close(evaluated[1:], [1.0, 5.0] if model.metrics_names[1] == "metric_1" else [5.0, 1.0])


@pytest.mark.follows("test_add_metric_in_layer_call")
@pytest.mark.parametrize("model_type", ["functional"])  # one kind of model (the original: all)
def test_add_metric_in_layer_call(model_type):
    class TestLayer(keras.layers.Layer):
        def build(self, input_shape):
            self.a = self.add_weight("a", (1, 1), initializer="ones", trainable=False)
            self.built = True

        def call(self, inputs):
            self.add_metric(tf.reduce_sum(inputs), name="metric_1", aggregation="mean")
            return inputs + 1

    layers = [TestLayer(input_shape=(1,)), keras.layers.Dense(2, kernel_initializer="ones")]
    model = model_from_layers(layers, (1,), model_type)
    model.compile(loss="mse", optimizer=keras.optimizers.SGD(0.01))
    x = np.ones(shape=(10, 1))
    y = np.ones(shape=(10, 2))
    history = model.fit(x, y, epochs=2, batch_size=5, validation_data=(x, y), verbose=0)
    assert_close(history.history["metric_1"][-1], 5.0)
    assert_close(history.history["val_metric_1"][-1], 5.0)


@pytest.mark.follows("test_add_metric_correctness")
def test_add_metric_correctness():
    inputs = keras.Input(shape=(1,))
    targets = keras.Input(shape=(1,))

    class Bias(keras.layers.Layer):
        def build(self, input_shape):
            self.bias = self.add_weight("bias", (1,), initializer="zeros")
            self.mae = keras.metrics.MeanAbsoluteError(name="mae_1")

        def call(self, inputs):
            inputs, targets = inputs
            outputs = inputs + self.bias
            self.add_metric(self.mae(targets, outputs), name="mae_1")
            return outputs

    outputs = Bias()([inputs, targets])
    model = keras.Model([inputs, targets], outputs)
    model.add_metric(
        keras.metrics.mean_absolute_error(targets, outputs), name="mae_2", aggregation="mean"
    )
    model.compile(
        loss="mae",
        optimizer=keras.optimizers.SGD(0.1),
        metrics=[keras.metrics.MeanAbsoluteError(name="mae_3")],
    )
    x = np.array([[0.0], [1.0], [2.0]])
    y = np.array([[0.5], [2.0], [3.5]])
    history = model.fit([x, y], y, batch_size=3, epochs=5, verbose=0)
    expected_val = [1.0, 0.9, 0.8, 0.7, 0.6]
    for key in ["loss", "mae_1", "mae_2", "mae_3"]:
        assert_close(history.history[key], expected_val, rtol=1e-3)


@pytest.mark.follows("test_add_metric_aggregation_mean")
def test_add_metric_aggregation_mean():
    class TestModel(keras.Model):
        def __init__(self):
            super().__init__(name="test_model")
            self.dense1 = keras.layers.Dense(2, kernel_initializer="ones")

        def call(self, x):
            self.add_metric(tf.reduce_sum(x), name="metric_1", aggregation="mean")
            return self.dense1(x)

    model = TestModel()
    model.compile("rmsprop", "mse")
    history = model.fit(np.ones(shape=(10, 1)), np.ones(shape=(10, 2)), batch_size=5, verbose=0)
    assert_close(history.history["metric_1"][-1], 5.0)


@pytest.mark.follows("test_add_metric_aggregation_none")
def test_add_metric_aggregation_none():
    class TestModel(keras.Model):
        def __init__(self):
            super().__init__(name="test_model")
            self.dense1 = keras.layers.Dense(2, kernel_initializer="ones")
            self.mean = keras.metrics.Mean(name="metric_1")

        def call(self, x):
            self.add_metric(self.mean(x), name="metric_1", aggregation=None)
            return self.dense1(x)

    model = TestModel()
    model.compile("rmsprop", "mse")
    history = model.fit(np.ones(shape=(10, 1)), np.ones(shape=(10, 2)), batch_size=5, verbose=0)
    assert_close(history.history["metric_1"][-1], 1.0)


@pytest.mark.follows("test_calling_evaluate_in_callback_during_fit")
def test_calling_evaluate_in_callback_during_fit():
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(2, kernel_initializer="ones")(inputs))
    model.compile("sgd", "mse", metrics=["mae"])
    x = np.ones((16, 2), np.float32)
    y = np.ones((16, 2), np.float32)
    evaluated = []

    class MyCallback(keras.callbacks.Callback):
        def on_epoch_end(self, *args, **kwargs):
            evaluated.append(self.model.evaluate(x, y, batch_size=16, verbose=0))

    history = model.fit(x, y, batch_size=16, epochs=2, callbacks=[MyCallback()], verbose=0)
    assert len(evaluated) == 2
    # After each epoch's one step, the evaluation sees the trained weights.
    assert evaluated[0][0] < history.history["loss"][0]


@pytest.mark.follows("test_that_trainable_disables_updates")
def test_that_trainable_disables_updates():
    val_a = np.random.random((10, 4))
    val_out = np.random.random((10, 4))
    a = keras.Input(shape=(4,))
    layer = keras.layers.BatchNormalization(input_shape=(4,))
    model = keras.Model(a, layer(a))

    def train_changes_predictions():
        model.compile("sgd", "mse")
        x1 = model.predict(val_a, batch_size=1, verbose=0)
        model.train_on_batch(val_a, val_out)
        x2 = model.predict(val_a, batch_size=1, verbose=0)
        return np.abs(np.sum(x1 - x2)) > 1e-5, np.allclose(x1, x2, atol=1e-7)

    model.trainable = False
    assert train_changes_predictions() == (False, True)
    model.trainable = True
    assert train_changes_predictions()[0]
    layer.trainable = False
    assert train_changes_predictions() == (False, True)


@pytest.mark.follows("test_weight_deduplication")
def test_weight_deduplication():
    class WatchingLayer(keras.layers.Layer):
        def __init__(self, dense_to_track):
            # Tracks the kernel and bias a second time: without deduplication they would
            # be updated twice, doubling the learning rate.
            self._kernel = dense_to_track.kernel
            self._bias = dense_to_track.bias
            super().__init__()

        def call(self, inputs):
            return inputs

    inp = keras.Input(shape=(1,))
    dense_layer = keras.layers.Dense(1)
    dense_output = dense_layer(inp)
    dense_layer.set_weights([np.ones((1, 1)), np.zeros((1,))])
    model = keras.Model(inp, WatchingLayer(dense_layer)(dense_output))
    # 0.25 is the edge of convergence for a doubled update; at 0.24 the right one converges.
    model.compile(loss="mse", optimizer=keras.optimizers.SGD(0.24))
    x = np.ones((64 * 2,))
    history = model.fit(x, 4.5 * x - 3.0, batch_size=64, epochs=2, verbose=0)
    assert history.history["loss"][-1] < 1e-6


@pytest.mark.follows("test_predict_error_with_empty_x")
def test_predict_error_with_empty_x():
    inputs = keras.Input(shape=(2,))
    model = keras.Model(inputs=inputs, outputs=keras.layers.Dense(4)(inputs))
    model.compile(loss="mse")
    with pytest.raises(TypeError, match="dataset length is unknown."):
        model.predict(np.array([]), verbose=0)


@pytest.mark.follows("test_on_batch_error_inconsistent_batch_size")
def test_on_batch_error_inconsistent_batch_size():
    inputs = [keras.Input(shape=(5,)) for _ in range(2)]
    output = keras.layers.Dense(4)(keras.layers.Concatenate()(inputs))
    model = keras.Model(inputs, output)
    model.compile(loss="mse")
    x = [np.ones((10, 5)), np.ones((10, 5))]
    with pytest.raises(ValueError, match="Data cardinality is ambiguous"):
        model.train_on_batch(x, np.ones((11, 4)))
    with pytest.raises(ValueError, match="Data cardinality is ambiguous"):
        model.test_on_batch(x, np.ones((11, 4)))
    with pytest.raises(ValueError, match="Data cardinality is ambiguous"):
        model.predict_on_batch([np.ones((10, 5)), np.ones((11, 5))])


@pytest.mark.follows("test_model_with_partial_loss")
def test_model_with_partial_loss():
    x = np.random.random((32, 3))
    y = np.random.random((32, 4))
    a = keras.Input(shape=(3,), name="input_a")
    a_2 = keras.layers.Dense(4, name="dense_1")(a)
    model = keras.Model(a, [a_2, keras.layers.Dropout(0.5, name="dropout")(a_2)])
    model.compile("rmsprop", {"dropout": "mse"}, metrics=["mae"])
    model.train_on_batch(x, y)
    model.test_on_batch(x, y)
    model.fit(x, y, verbose=0)
    model.evaluate(x, y, verbose=0)

    a = keras.Input(shape=(3,), name="input_a")
    a_2 = keras.layers.Dense(4, name="dense_1")(a)
    a_3 = keras.layers.Dense(4, name="dense_2")(a_2)
    model = keras.Model(a, [a_2, a_3])
    model.compile("rmsprop", {"dense_2": "mse"}, metrics={"dense_1": "mae"})
    model.train_on_batch(x, y)
    model.fit(x, y, verbose=0)
    results = dict(zip(model.metrics_names, model.evaluate(x, y, verbose=0), strict=True))
    first, second = model.predict(x, verbose=0)
    assert_close(results["loss"], np.mean((second - y) ** 2), rtol=1e-4)
    assert_close(results["dense_1_mae"], np.mean(np.abs(first - y)), rtol=1e-4)


@pytest.mark.follows("test_multiple_add_metric_calls")
def test_multiple_add_metric_calls():
    class TestModel(keras.Model):
        def __init__(self):
            super().__init__(name="test_model")
            self.dense1 = keras.layers.Dense(2, kernel_initializer="ones")
            self.mean1 = keras.metrics.Mean(name="metric_1")
            self.mean2 = keras.metrics.Mean(name="metric_2")

        def call(self, x):
            self.add_metric(self.mean2(x), name="metric_2")
            self.add_metric(self.mean1(x), name="metric_1")
            self.add_metric(tf.reduce_sum(x), name="metric_3", aggregation="mean")
            return self.dense1(x)

    model = TestModel()
    assert [m.name for m in model.metrics] == ["metric_1", "metric_2"]
    model.compile(loss="mse", optimizer=tf.compat.v1.train.RMSPropOptimizer(0.01))
    x, y = np.ones(shape=(10, 1)), np.ones(shape=(10, 2))
    history = model.fit(x, y, epochs=2, batch_size=5, validation_data=(x, y), verbose=0)
    assert_close(
        [history.history[f"metric_{i}"][-1] for i in (1, 2, 3)], [1.0, 1.0, 5.0], rtol=1e-6
    )
    assert_close(model.evaluate(x, y, batch_size=5, verbose=0)[1:4], [1.0, 1.0, 5.0], atol=0.1)
    model.predict(x, batch_size=5, verbose=0)
    model.train_on_batch(x, y)
    model.test_on_batch(x, y)


@pytest.mark.follows("test_add_metric_order")
def test_add_metric_order():
    class MyLayer(keras.layers.Layer):
        def call(self, inputs, training=None, mask=None):
            self.add_metric(tf.ones([32]) * 2.0, name="two", aggregation="mean")
            return inputs

    class MyModel(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._sampler = MyLayer(name="sampler")

        def call(self, inputs, training=None, mask=None):
            z = self._sampler(inputs)
            self.add_metric(tf.ones([32]) * 1.0, name="one", aggregation="mean")
            self.add_metric(tf.ones([32]) * 3.0, name="three", aggregation="mean")
            return z

    xdata = np.random.uniform(size=[32, 16]).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((xdata, xdata)).batch(32, drop_remainder=True)
    model = MyModel()
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(dataset, epochs=3, verbose=0)
    assert history.history == {
        "loss": [0.0, 0.0, 0.0],
        "three": [3.0, 3.0, 3.0],
        "two": [2.0, 2.0, 2.0],
        "one": [1.0, 1.0, 1.0],
    }


@pytest.mark.follows("test_duplicate_metric_name_in_add_metric")
def test_duplicate_metric_name_in_add_metric():
    class TestModel(keras.Model):
        def __init__(self):
            super().__init__(name="test_model")
            self.dense1 = keras.layers.Dense(2, kernel_initializer="ones")
            self.mean = keras.metrics.Mean(name="metric_1")
            self.mean2 = keras.metrics.Mean(name="metric_1")

        def call(self, x):
            self.add_metric(self.mean(x), name="metric_1")
            return self.dense1(x)

    model = TestModel()
    model.compile(loss="mse", optimizer=tf.compat.v1.train.RMSPropOptimizer(0.01))
    x, y = np.ones(shape=(10, 1)), np.ones(shape=(10, 2))
    message = (
        "Please provide different names for the metrics you have added. "
        'We found 2 metrics with the name: "metric_1"'
    )
    with pytest.raises(ValueError, match=message):
        model.fit(x, y, epochs=2, batch_size=5, validation_data=(x, y), verbose=0)


@pytest.mark.follows("test_add_metric_without_name")
def test_add_metric_without_name():
    class TestModel(keras.Model):
        def __init__(self):
            super().__init__(name="test_model")
            self.dense1 = keras.layers.Dense(2, kernel_initializer="ones")

        def call(self, x):
            self.add_metric(tf.reduce_sum(x), aggregation="mean")
            return self.dense1(x)

    model = TestModel()
    model.compile(loss="mse", optimizer=tf.compat.v1.train.RMSPropOptimizer(0.01))
    x, y = np.ones(shape=(10, 1)), np.ones(shape=(10, 2))
    with pytest.raises(ValueError, match="Please provide a name for your metric like"):
        model.fit(x, y, epochs=2, batch_size=5, validation_data=(x, y), verbose=0)


@pytest.mark.follows("test_layer_ordering")
def test_layer_ordering():
    class MyLayer(keras.layers.Layer):
        pass

    class MyModel(keras.Model):
        def __init__(self, name):
            super().__init__(name=name)
            self.weight = tf.Variable(0, name=name)
            self.direct_sublayer = MyLayer(name="direct")
            self.direct_sublayer.d = {"d": MyLayer(name="direct/dict")}
            self.dict_sublayer = {"d": MyLayer(name="dict")}
            self.dict_sublayer["d"].direct = MyLayer(name="dict/direct")

    model = MyModel("model")
    assert [layer.name for layer in model._flatten_layers()] == [
        "model", "direct", "direct/dict", "dict", "dict/direct",
    ]  # fmt: skip
    assert [layer.name for layer in model.layers] == ["direct", "dict"]


@pytest.mark.follows("test_validation_steps_without_data")
def test_validation_steps_without_data():
    # The original skips its check in eager mode ("Check removed in new `fit`"): a fit
    # with validation_steps but no validation data trains and does not validate.
    model = small_mlp(2, 1, 10, "functional")
    model.compile("sgd", "mse")
    history = model.fit(
        np.ones((10, 10)), np.ones((10, 1)), epochs=4, batch_size=10, validation_steps=3, verbose=0
    )
    assert list(history.history) == ["loss"] and len(history.history["loss"]) == 4


@pytest.mark.follows("test_layer_trainability_switch")
def test_layer_trainability_switch():
    model = keras.Sequential([keras.layers.Dense(2, trainable=False, input_dim=1)])
    assert model.trainable_weights == []
    layer = keras.layers.Dense(2, input_dim=1)
    model = keras.Sequential([layer])
    assert model.trainable_weights == layer.trainable_weights
    layer.trainable = False
    assert model.trainable_weights == []
    x = keras.Input(shape=(1,))
    assert keras.Model(x, keras.layers.Dense(2, trainable=False)(x)).trainable_weights == []
    layer = keras.layers.Dense(2)
    model = keras.Model(x, layer(x))
    assert model.trainable_weights == layer.trainable_weights
    layer.trainable = False
    assert model.trainable_weights == []


@pytest.mark.follows("test_nested_model_trainability")
def test_nested_model_trainability():
    inner = keras.Sequential([keras.layers.Dense(2, input_dim=1)])
    x = keras.Input(shape=(1,))
    outer = keras.Model(x, inner(x))
    assert outer.trainable_weights == inner.trainable_weights
    inner.trainable = False
    assert outer.trainable_weights == []


class BareUpdateLayer(keras.layers.Layer):
    def build(self, input_shape):
        self.counter = self.add_weight(
            "counter", dtype="int32", shape=(), initializer="zeros", trainable=False
        )

    def call(self, inputs):
        tf.compat.v1.assign_add(self.counter, 1)
        return tf.cast(self.counter, inputs.dtype) * inputs


class LambdaUpdateLayer(BareUpdateLayer):
    def call(self, inputs):
        self.add_update(lambda: tf.compat.v1.assign_add(self.counter, 1))
        return tf.cast(self.counter, inputs.dtype) * inputs


class NestedUpdateLayer(keras.layers.Layer):
    def build(self, input_shape):
        self.layer = BareUpdateLayer()
        self.layer.build(input_shape)

    @property
    def counter(self):
        return self.layer.counter

    def call(self, inputs):
        return self.layer(inputs)


class SubgraphUpdateLayer(BareUpdateLayer):
    def call(self, inputs, training=None):
        if training is None:
            training = backend.learning_phase()
        if training:
            self.counter.assign(self.counter + 1)
        return inputs


def _fit_counting(layer, model_type):
    """Fits 5 batches through `layer`; its counter afterwards."""
    model = model_from_layers([layer, keras.layers.Dense(1)], (10,), model_type)
    model.compile("sgd", "mse")
    model.fit(np.ones((10, 10)), np.ones((10, 1)), batch_size=2, epochs=1, verbose=0)
    return int(layer.counter.numpy())


@pytest.mark.follows("test_updates_in_model")
@pytest.mark.parametrize(
    ("layer_class", "model_type"),  # each kind of update and of model once
    zip([BareUpdateLayer, LambdaUpdateLayer, NestedUpdateLayer], MODEL_TYPES, strict=True),
)
def test_updates_in_model(layer_class, model_type):
    assert _fit_counting(layer_class(), model_type) == 5


@pytest.mark.follows("test_lambda_updates_trainable_false")
@pytest.mark.parametrize("model_type", ["functional"])  # one kind of model (the original: all)
def test_lambda_updates_trainable_false(model_type):
    layer = LambdaUpdateLayer()
    model = model_from_layers([layer, keras.layers.Dense(1)], (10,), model_type)
    x, y = np.ones((10, 10)), np.ones((10, 1))
    model.compile("sgd", "mse")
    model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert int(layer.counter.numpy()) == 5
    layer.trainable = False
    model.compile("sgd", "mse")
    model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert int(layer.counter.numpy()) == 5


@pytest.mark.follows("test_subgraph_updates_in_model")
@pytest.mark.parametrize("model_type", ["subclass"])  # one kind of model (the original: all)
def test_subgraph_updates_in_model(model_type):
    assert _fit_counting(SubgraphUpdateLayer(), model_type) == 5


@pytest.mark.follows("test_batchnorm_trainable_false")
@pytest.mark.parametrize("model_type", ["sequential"])  # one kind of model (the original: all)
def test_batchnorm_trainable_false(model_type):
    bn = keras.layers.BatchNormalization()
    model = model_from_layers([bn, keras.layers.Dense(1)], (10,), model_type)
    bn.trainable = False
    model.compile("sgd", "mse")
    model.fit(np.ones((10, 10)), np.ones((10, 1)), batch_size=2, epochs=1, verbose=0)
    assert_close(bn.moving_mean.numpy(), np.zeros((10,)))
    assert_close(bn.moving_variance.numpy(), np.ones((10,)))


@pytest.mark.follows("test_build_list_of_inputs")
def test_build_list_of_inputs():
    class MyModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.l1 = keras.layers.Dense(1)
            self.l2 = keras.layers.Dense(2)

        def call(self, x):
            a, b = x
            return self.l1(a) + self.l2(b)

    for shapes in ([(None, 1), (None, 2)], [[None, 1], [None, 2]]):
        model = MyModel()
        model.build(shapes)
        assert model.l1.kernel.shape.as_list() == [1, 1]
        assert model.l2.kernel.shape.as_list() == [2, 2]


@pytest.mark.follows("test_build_single_inputs")
def test_build_single_inputs():
    class MyModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.l1 = keras.layers.Dense(1)

        def call(self, x):
            return self.l1(x)

    for shape in ((None, 1), [None, 1]):
        model = MyModel()
        model.build(shape)
        assert model.l1.kernel.shape.as_list() == [1, 1]


@pytest.mark.follows("test_build_dict_inputs")
def test_build_dict_inputs():
    class MyModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.l1 = keras.layers.Dense(1)

        def call(self, inputs):
            return self.l1(inputs["x"])

    model = MyModel()
    model.build({"x": [None, 16]})
    assert model.l1.kernel.shape.as_list() == [16, 1]


@pytest.mark.follows("test_model_dtype")
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_model_dtype(dtype):
    class AssertTypeLayer(keras.layers.Layer):
        def call(self, inputs):
            assert inputs.dtype.name == self.dtype, inputs.dtype.name
            return inputs + 1.0

    model = model_from_layers([AssertTypeLayer(dtype=dtype)], (10,), "functional")
    model.compile("sgd", "mse")
    history = model.fit(np.ones((10, 10)), np.ones((10, 10)), batch_size=10, verbose=0)
    assert_close(history.history["loss"], [1.0])  # the layer adds one to ones


@pytest.mark.follows("test_model_input_dtype")
def test_model_input_dtype():
    model = small_mlp(1, 10, 10, "sequential")
    model.compile("sgd", "mse")
    x = np.ones((10, 10), np.float16)
    dataset = tf.data.Dataset.from_tensor_slices((x, x)).batch(2, drop_remainder=True)
    history = model.fit(dataset, verbose=0)  # float16 data into a float32 model
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.follows("test_losses_of_different_dtypes")
def test_losses_of_different_dtypes():
    inp = keras.Input(shape=(2,))
    out_1 = keras.layers.Dense(2, dtype="float32", kernel_regularizer="l2")(inp)
    out_2 = keras.layers.Dense(2, dtype="float16", kernel_regularizer="l2")(inp)
    model = keras.Model(inp, [out_1, out_2])
    model.add_loss(tf.reduce_sum(tf.cast(out_2, "float16")))
    model.compile("sgd", ["mse", "mse"])
    x, y = np.ones((10, 2)), np.ones((10, 2))
    history = model.fit(x, [y, y], batch_size=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.follows("test_losses_of_different_dtypes_with_subclassed_model")
def test_losses_of_different_dtypes_with_subclassed_model():
    class MyModel(keras.Model):
        def build(self, _):
            self.dense = keras.layers.Dense(2)

        def call(self, inputs):
            self.add_loss(tf.cast(tf.nn.l2_loss(inputs), "float16"))
            return self.dense(inputs)

    model = MyModel(dtype="float32")
    model.compile("sgd", "mse")
    x, y = np.ones((10, 2)), np.ones((10, 2))
    history = model.fit(x, y, batch_size=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.follows("test_regularizer_of_different_dtype")
def test_regularizer_of_different_dtype():
    inp = keras.Input(shape=(2,))
    out = keras.layers.Dense(
        2,
        dtype="float32",
        kernel_regularizer=lambda w: tf.cast(tf.nn.l2_loss(w), "float16"),
        kernel_initializer="ones",
    )(inp)
    model = keras.Model(inp, out)
    model.compile("sgd", "mse")
    loss = model.evaluate(np.ones((10, 2)), np.ones((10, 2)), batch_size=10, verbose=0)
    # Outputs 2 against 1 (mse 1), plus the L2 loss of the ones kernel (4 / 2).
    assert_close(loss, 3.0, rtol=1e-3)


@pytest.mark.follows("test_metrics_masking")
def test_metrics_masking():
    x = np.array([[[1], [1]], [[1], [1]], [[0], [0]]])
    y = np.array([[[1], [1]], [[0], [1]], [[1], [1]]])

    def train():
        model = keras.Sequential(
            [
                keras.layers.Masking(mask_value=0, input_shape=(2, 1)),
                keras.layers.TimeDistributed(keras.layers.Dense(1, kernel_initializer="ones")),
            ]
        )
        model.compile(
            tf.compat.v1.train.RMSPropOptimizer(learning_rate=0.001),
            loss="mse",
            weighted_metrics=["accuracy"],
        )
        masked = model.train_on_batch(x, y)
        weighted = model.train_on_batch(x, y, sample_weight=np.array([3, 2, 4]))
        return masked, weighted

    masked, weighted = train()
    assert_close(masked, [0.25, 0.75], atol=0.1)  # the mask applies
    # With sample weights the original's Keras gave a loss of 0.3328; stock tf_keras 2.21
    # computes another, which the IPU must match.
    assert_close(weighted, stock(train)[1], rtol=1e-5)
    assert_close(weighted[1], 0.8, atol=0.001)


@pytest.mark.follows("test_model_with_nested_compiled_model")
def test_model_with_nested_compiled_model():
    class LayerWithAddMetric(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1, kernel_initializer="ones")

        def call(self, inputs):
            outputs = self.dense(inputs)
            self.add_metric(tf.reduce_sum(outputs), name="mean", aggregation="mean")
            return outputs

    x = keras.Input(shape=(1,))
    y = LayerWithAddMetric()(x)
    inner = keras.Model(x, y)
    inner.add_metric(tf.reduce_sum(y), name="mean1", aggregation="mean")
    inner.compile("sgd", loss="mse", metrics=[keras.metrics.Accuracy("acc")])
    inner.fit(np.ones((10, 1)), np.ones((10, 1)), batch_size=10, verbose=0)
    assert [m.name for m in inner.metrics] == ["loss", "acc", "mean", "mean1"]

    x = keras.Input(shape=[1])
    y = inner(x)
    outer = keras.Model(x, y)
    outer.add_metric(tf.reduce_sum(y), name="mean2", aggregation="mean")
    outer.compile("sgd", loss="mse", metrics=[keras.metrics.Accuracy("acc2")])
    outer.fit(np.ones((10, 1)), np.ones((10, 1)), batch_size=10, verbose=0)
    assert [m.name for m in outer.metrics] == ["loss", "acc2", "mean", "mean1", "mean2"]


@pytest.mark.follows("test_evaluate_with_custom_test_step")
@pytest.mark.parametrize(
    ("use_compiled_metrics", "use_custom_metrics"), [(False, True), (True, False), (True, True)]
)
def test_evaluate_with_custom_test_step(use_compiled_metrics, use_custom_metrics):
    class MyModel(keras.Model):
        def test_step(self, data):
            x, y = data
            pred = self(x)
            metrics = {}
            if use_compiled_metrics:
                self.compiled_metrics.update_state(y, pred)
                self.compiled_loss(y, pred)
                for metric in self.metrics:
                    metrics[metric.name] = metric.result()
            if use_custom_metrics:
                metrics.update({"mean": tf.reduce_mean(pred), "sum": tf.reduce_sum(pred)})
            return metrics

    inputs = keras.Input((2,))
    model = MyModel(inputs, keras.layers.Dense(3)(inputs))
    model.compile("adam", "mse", metrics=["mae", "mape"] if use_compiled_metrics else None)
    x, y = np.random.random((4, 2)), np.random.random((4, 3))
    results_list = model.evaluate(x, y, batch_size=1, verbose=0)
    results_dict = model.evaluate(x, y, return_dict=True, batch_size=1, verbose=0)
    names = (["loss", "mae", "mape"] if use_compiled_metrics else []) + (
        ["mean", "sum"] if use_custom_metrics else []
    )
    assert results_list == [results_dict[name] for name in names]
    if use_custom_metrics:  # the last batch's prediction
        last = model.predict(x[-1:], batch_size=1, verbose=0)
        assert_close(results_dict["sum"], np.sum(last), rtol=1e-5)


@pytest.mark.follows("test_model_make_function")
@pytest.mark.parametrize("model_type", ["sequential"])  # one kind of model (the original: all)
def test_model_make_function(model_type):
    layers = [keras.layers.Dense(10, dtype=np.float16), keras.layers.Dense(10, dtype=np.float16)]
    model = model_from_layers(layers, (1,), model_type)
    model.compile("sgd", "mse")
    for make in (model.make_train_function, model.make_test_function, model.make_predict_function):
        original = make()
        assert original is not None
        assert make() is original  # cached
        assert make(force=True) is not original  # made again when forced


@pytest.mark.follows("test_calling_aggregate_gradient")
def test_calling_aggregate_gradient():
    class _Optimizer(keras.optimizers.legacy.SGD):
        """Records whether Keras asks it to aggregate the gradients."""

        _HAS_AGGREGATE_GRAD = True

        def __init__(self):
            self.aggregate_gradients_called = False
            super().__init__(name="MyOptimizer")

        def _aggregate_gradients(self, grads):
            self.aggregate_gradients_called = True
            return super()._aggregate_gradients(grads)

    class _OptimizerOverrideApplyGradients(_Optimizer):
        """One whose apply_gradients has no `experimental_aggregate_gradients`."""

        _HAS_AGGREGATE_GRAD = False

        def apply_gradients(self, grads_and_vars, name=None):
            return super().apply_gradients(grads_and_vars, name)

    model = keras.Sequential([keras.layers.Dense(10, activation="relu")])
    x, y = np.ones((32, 10)), np.ones((32, 10))
    for optimizer in (_Optimizer(), _OptimizerOverrideApplyGradients()):
        model.compile(optimizer, "mse")
        model.fit(x, y, verbose=0)
        assert model.optimizer.aggregate_gradients_called


@pytest.mark.follows("test_fit_with_incorrect_weights")
def test_fit_with_incorrect_weights():
    input_a = keras.Input(shape=(3,), name="input_a")
    input_b = keras.Input(shape=(3,), name="input_b")
    dense = keras.layers.Dense(2, name="output_1")
    output_2 = keras.layers.Dropout(0.5, name="output_2")(dense(input_b))
    model = keras.Model([input_a, input_b], [dense(input_a), output_2])
    model.compile(optimizer="adam", loss="mse")
    x, y = np.random.random((10, 3)), np.random.random((10, 2))
    with pytest.raises(ValueError):
        model.fit([x, x], [y, y], epochs=1, batch_size=5, sample_weight={"unknown": x})
    with pytest.raises(ValueError):
        model.fit([x, x], [y, y], epochs=1, batch_size=5, class_weight={"unknown": 1})


@pytest.mark.follows("test_masking_deferred")
def test_masking_deferred():  # Sequential (the original: also subclassed)
    layers = [
        keras.layers.Masking(mask_value=0),
        keras.layers.TimeDistributed(keras.layers.Dense(1, kernel_initializer="one")),
    ]
    model = keras.Sequential(layers)  # no input shape: built by its first batch
    model.compile(loss="mse", optimizer=tf.compat.v1.train.RMSPropOptimizer(learning_rate=0.001))
    x = np.array([[[1], [1]], [[0], [0]]])
    y = np.array([[[1], [1]], [[1], [1]]])
    assert model.train_on_batch(x, y) == 0


@pytest.mark.follows("test_mask_argument_in_layer")
def test_mask_argument_in_layer():
    masks = []

    class CustomMaskedLayer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.supports_masking = True

        def call(self, inputs, mask=None):
            masks.append(mask)
            return inputs

    inputs = keras.Input((3,))
    outputs = CustomMaskedLayer()(keras.layers.Masking(mask_value=0)(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(loss="mse", optimizer=tf.compat.v1.train.RMSPropOptimizer(learning_rate=0.001))
    model.train_on_batch(np.random.random((5, 3)), np.random.random((5, 3)))
    assert masks and all(mask is not None for mask in masks)


@pytest.mark.follows("test_toggle_value")
def test_toggle_value():
    input_0 = keras.Input(shape=(1,))
    dense_0 = keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="ones")
    dense_1 = keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="ones")
    model = keras.Model(input_0, keras.layers.Add()([dense_0(input_0), dense_1(input_0)]))
    dense_0.trainable = False
    model.compile("sgd", "mse")
    x = np.ones((10, 1))
    model.train_on_batch(x, 5 * x + 2)
    # Trainable again, but the model was compiled with it frozen: it stays as it was.
    dense_0.trainable = True
    model.train_on_batch(x, 5 * x + 2)
    kernel, bias = dense_0.get_weights()
    assert [kernel[0, 0], bias[0]] == [1.0, 1.0]
    kernel, bias = dense_1.get_weights()
    assert_close([kernel[0, 0], bias[0]], [1.1176, 1.1176], rtol=1e-4)


@pytest.mark.follows("test_model_instrumentation")
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_model_instrumentation(model_type):
    layers = [keras.layers.Dense(10, dtype=np.float16), keras.layers.Dense(10, dtype=np.float16)]
    model = model_from_layers(layers, (1,), model_type)
    assert model._instrumented_keras_api
    assert model._instrumented_keras_model_class
    assert not model._instrumented_keras_layer_class


@pytest.mark.follows("test_sequence_input_types")
def test_sequence_input_types():
    # The original's 'dataset' input type: a Python generator or keras.utils.Sequence is
    # refused in an IPU strategy (keras/ipu/extensions/data_adapter.py).
    def xy_dataset():
        steps = tf.data.Dataset.range(16).map(lambda i: tf.cast(tf.reshape(i // 4, [1]), "float32"))
        return tf.data.Dataset.zip((steps, steps.map(lambda x: 2.0 * x))).batch(
            4, drop_remainder=True
        )

    def x_dataset():
        return xy_dataset().map(lambda x, y: x)

    def run(model):
        model.compile(loss="mse", optimizer="sgd")
        model.fit(xy_dataset(), shuffle=False, verbose=0)
        return model.evaluate(xy_dataset(), verbose=0), model.predict(x_dataset(), verbose=0)

    model = keras.Sequential([keras.layers.Dense(1, kernel_initializer="ones", input_shape=(1,))])
    loss, predictions = run(model)

    def reference():
        ref = keras.Sequential([keras.layers.Dense(1, kernel_initializer="ones", input_shape=(1,))])
        return run(ref)

    ref_loss, ref_predictions = stock(reference)
    assert predictions.shape == (16, 1)
    assert_close(loss, ref_loss, rtol=1e-4)
    assert_close(predictions, ref_predictions, rtol=1e-4)

    class XYSequence(keras.utils.Sequence):
        def __getitem__(self, idx):
            return np.full((4, 1), idx, np.float32), np.full((4, 1), 2.0 * idx, np.float32)

        def __len__(self):
            return 4

    with pytest.raises(ValueError, match="of type `XYSequence` which is not compatible"):
        model.fit(XYSequence(), verbose=0)


@pytest.mark.follows("test_custom_mapping_in_config")
def test_custom_mapping_in_config():
    class MyModel(keras.Model):
        def call(self, inputs):
            return inputs

        def get_config(self):
            self.a = {}
            return {"a": self.a}

    assert '{"a": {}}' in MyModel().to_json()


@pytest.mark.follows("test_training_on_sparse_data_with_dense_placeholders_v1")
def test_training_on_sparse_data_with_dense_placeholders_v1():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    # The original builds this in a v1 graph of its own (the strategy's scope is the eager one's).
    with tf.Graph().as_default():
        inputs = [scipy_sparse.random(6, 3, density=0.25, random_state=i).tocsr() for i in (0, 1)]
        targets = [scipy_sparse.random(6, i, density=0.25, random_state=i).tocsr() for i in (3, 4)]
        in1, in2 = keras.Input(shape=(3,)), keras.Input(shape=(3,))
        out1 = keras.layers.Dropout(0.5, name="dropout")(in1)
        out2 = keras.layers.Dense(4, name="dense_1")(in2)
        model = keras.Model([in1, in2], [out1, out2])
        predictions = model.predict(inputs, batch_size=2)
        # Not training: the dropout passes its input through.
        assert_close(predictions[0], inputs[0].toarray())
        model.compile("rmsprop", "mse", metrics=["mae", keras.metrics.CategoricalAccuracy()])
        history = model.fit(
            inputs, targets, epochs=1, batch_size=2, validation_split=0.5, verbose=0
        )
        assert "val_loss" in history.history
        results = model.evaluate(inputs, targets, batch_size=2, verbose=0)
        assert np.all(np.isfinite(results))


@pytest.mark.follows("test_compile_with_sparse_placeholders")
def test_compile_with_sparse_placeholders():
    inputs = keras.Input(shape=(10,), sparse=True)
    weights = tf.Variable(np.ones((10, 1), np.float32), name="weights")
    outputs = keras.layers.Lambda(lambda x: tf.sparse.sparse_dense_matmul(x, weights))(inputs)
    model = keras.Model([inputs], outputs)
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    assert model.compiled_loss is not None
    assert model.output_shape == (None, 1)


@pytest.mark.follows("test_weight_deduplication_in_methods")
def test_weight_deduplication_in_methods():
    inp = keras.Input(shape=(1,))
    bn = keras.layers.BatchNormalization()
    dense = keras.layers.Dense(1)
    m0 = keras.Model(inp, dense(bn(inp)))
    m1 = keras.Model(inp, dense(bn(inp)))
    model = keras.Model(inp, keras.layers.Add()([m0(inp), m1(inp)]))
    assert len(model.trainable_weights) == 4
    assert len(model.non_trainable_weights) == 2
    assert len(model.weights) == 6


@pytest.mark.follows("test_losses_in_defun")
def test_losses_in_defun():
    layer = keras.layers.Dense(1, kernel_regularizer="l1")
    layer(tf.ones([1, 10]))

    @tf.function
    def get_losses():
        return layer.losses

    expected = np.sum(np.abs(layer.kernel.numpy())) * 0.01  # the "l1" regularizer's factor
    assert_close(layer.losses, get_losses())
    assert_close(layer.losses[0], expected, rtol=1e-5)


@pytest.mark.follows("test_logging")
def test_logging(capsys):
    model = keras.Sequential(
        [keras.layers.Dense(10, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]
    )
    model.compile(
        tf.compat.v1.train.RMSPropOptimizer(learning_rate=0.001), loss="binary_crossentropy"
    )
    model.fit(np.ones((10, 10), "float32"), np.ones((10, 1), "float32"), epochs=5, batch_size=10)
    assert "Epoch 5/5" in capsys.readouterr().out


def _two_in_two_out_model():
    a = keras.Input(shape=(3,), name="input_a")
    b = keras.Input(shape=(3,), name="input_b")
    dense = keras.layers.Dense(4, name="dense")
    c = dense(a)
    d = dense(b)
    e = keras.layers.Dropout(0.5, name="dropout")(c)
    return keras.Model([a, b], [d, e])


@pytest.mark.follows("test_training_with_loss_instance")
def test_training_with_loss_instance():
    model = _two_in_two_out_model()
    model.compile(
        tf.compat.v1.train.RMSPropOptimizer(learning_rate=0.001),
        loss=keras.losses.MeanSquaredError(),
        metrics=[keras.metrics.CategoricalAccuracy(), "mae"],
        loss_weights=[1.0, 0.5],
    )
    rng = np.random.default_rng(0)
    x = [rng.random((10, 3)), rng.random((10, 3))]
    y = [rng.random((10, 4)), rng.random((10, 4))]
    history = model.fit(x, y, epochs=1, batch_size=5, verbose=0)
    logs = history.history
    # The total is the weighted sum of the two outputs' losses.
    assert_close(logs["loss"][0], logs["dense_loss"][0] + 0.5 * logs["dropout_loss"][0], rtol=1e-4)


class _BatchCounter(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batches = 0

    def on_batch_end(self, batch, logs=None):
        self.batches += 1


@pytest.mark.follows("test_static_batch_in_input_layer")
@pytest.mark.parametrize(("batch_size", "expected_batches"), [(None, 2), (4, 16)])
def test_static_batch_in_input_layer(batch_size, expected_batches):
    # The original runs this in a v1 graph, where the Input's static batch size sets the batch
    # size of `fit`; eagerly (TF2 Keras) `fit` keeps its default of 32.
    x, y = np.ones((64, 10), "float32"), np.ones((64, 1), "float32")
    with tf.Graph().as_default():
        inputs = keras.Input(batch_size=batch_size, shape=(10,))
        model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(inputs))
        model.compile(keras.optimizers.legacy.Adam(0.001), "binary_crossentropy")
        counter = _BatchCounter()
        model.fit(x, y, callbacks=[counter], verbose=0)
        assert counter.batches == expected_batches
        model = keras.Sequential([keras.layers.Dense(1, batch_input_shape=(batch_size, 10))])
        model.compile(keras.optimizers.legacy.Adam(0.001), "binary_crossentropy")
        counter = _BatchCounter()
        model.fit(x, y, callbacks=[counter], verbose=0)
        assert counter.batches == expected_batches


@pytest.mark.follows("test_static_batch_in_input_layer_consistency_checks")
def test_static_batch_in_input_layer_consistency_checks():
    x, y = np.ones((64, 10), "float32"), np.ones((64, 1), "float32")
    with tf.Graph().as_default():
        inputs = keras.Input(batch_size=2, shape=(10,))
        model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(inputs))
        model.compile(keras.optimizers.legacy.Adam(0.001), "binary_crossentropy")
        with pytest.raises(ValueError, match="incompatible with the specified batch size"):
            model.fit(x, y, batch_size=4, verbose=0)


@pytest.mark.follows("test_compatible_batch_size_functional_model")
def test_compatible_batch_size_functional_model():
    class MyLayer(keras.layers.Layer):
        def call(self, inputs):
            return tf.concat(inputs, axis=0)

    input1 = keras.Input(batch_size=2, shape=(10,))
    input2 = keras.Input(batch_size=3, shape=(10,))
    outputs = MyLayer()([input1, input2])
    with pytest.raises(ValueError, match="specified batch sizes of the Input Layers"):
        keras.Model([input1, input2], outputs)


@pytest.mark.follows("test_calling_subclass_model_on_different_datasets")
def test_calling_subclass_model_on_different_datasets():
    class SubclassedModel(keras.Model):
        def call(self, inputs):
            return inputs * 2

    # The original runs this in a v1 graph of its own (no IPU strategy in it).
    with tf.Graph().as_default():
        model = SubclassedModel()
        dataset_one = tf.data.Dataset.range(2).batch(2)
        dataset_two = tf.data.Dataset.range(3, 10).batch(2)
        np.testing.assert_array_equal(model.predict(dataset_one, steps=1, verbose=0), [[0], [2]])
        np.testing.assert_array_equal(
            model.predict(dataset_two, steps=2, verbose=0), [[6], [8], [10], [12]]
        )


@pytest.mark.follows("test_subclassed_model_with_training_arg")
def test_subclassed_model_with_training_arg():
    class LayerWithTrainingArg(keras.layers.Layer):
        def call(self, inputs, training=None):
            self.training = training
            return inputs

    class ModelWithTrainingArg(keras.Model):
        def __init__(self):
            super().__init__()
            self.l1 = LayerWithTrainingArg()

        def call(self, inputs, training=None):
            self.training = training
            return self.l1(inputs, training=training)

    x = np.zeros((1, 2))
    model = ModelWithTrainingArg()
    model.compile(loss="mse", optimizer="sgd")
    model.fit(x, x, epochs=1, batch_size=1, verbose=0)
    assert model.training is True
    assert model.l1.training is True


@pytest.mark.follows("test_gradients_are_none")
def test_gradients_are_none():
    class DenseWithExtraWeight(keras.layers.Dense):
        def build(self, input_shape):
            # No gradient reaches the extra weights.
            self.extra_weight_1 = self.add_weight("extra_weight_1", shape=(), initializer="ones")
            super().build(input_shape)
            self.extra_weight_2 = self.add_weight("extra_weight_2", shape=(), initializer="ones")

    model = keras.Sequential([DenseWithExtraWeight(4, input_shape=(4,))])
    model.compile(keras.optimizers.Adam(clipnorm=1.0, clipvalue=1.0), "mse")
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="has `None` for gradient."):
        model.fit(rng.normal(size=(64, 4)), rng.normal(size=(64, 4)), verbose=0)


@pytest.mark.follows("test_compile_warning_for_loss_missing_output")
def test_compile_warning_for_loss_missing_output():
    inp = keras.Input(shape=(16,), name="input_a")
    out_1 = keras.layers.Dense(8, name="dense_1")(inp)
    out_2 = keras.layers.Dense(3, activation="softmax", name="dense_2")(out_1)
    model = keras.Model(inputs=[inp], outputs=[out_1, out_2])
    model.compile(
        tf.compat.v1.train.RMSPropOptimizer(learning_rate=0.001),
        loss={"dense_2": "categorical_crossentropy"},
        metrics={"dense_2": "categorical_accuracy", "dense_1": keras.metrics.CategoricalAccuracy()},
    )
    rng = np.random.default_rng(0)
    x = rng.random((4, 16))
    y = [rng.random((4, 8)), np.eye(3)[[0, 1, 2, 0]]]
    logs = model.train_on_batch(x, y, return_dict=True)
    # Only dense_2 has a loss: the total is its loss; dense_1 still gets its metric.
    assert_close(logs["loss"], logs["dense_2_loss"], rtol=1e-5)
    assert "dense_1_categorical_accuracy" in logs


@pytest.mark.follows("test_temporal_sample_weights")
def test_temporal_sample_weights():
    timesteps, input_dim, num_classes, batch_size = 3, 5, 5, 5
    rng = np.random.default_rng(1337)
    x = np.repeat(rng.random((20, 1, input_dim)), timesteps, axis=1).astype(np.float32)
    labels = rng.integers(0, num_classes, 20)
    y = np.repeat(np.eye(num_classes)[labels][:, None, :], timesteps, axis=1)
    sample_weight = np.repeat(np.where(labels == 3, 10.0, 1.0)[:, None], timesteps, axis=1)

    def run(model):
        model.compile(
            tf.compat.v1.train.RMSPropOptimizer(learning_rate=0.001),
            loss="categorical_crossentropy",
            metrics=["acc", keras.metrics.CategoricalAccuracy()],
            weighted_metrics=["mae", keras.metrics.CategoricalAccuracy()],
            sample_weight_mode="temporal",
        )
        model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, sample_weight=sample_weight)
        model.train_on_batch(x[:5], y[:5], sample_weight=sample_weight[:5])
        return model.evaluate(x, y, sample_weight=sample_weight, batch_size=5, verbose=0)

    def build():
        return keras.Sequential(
            [
                keras.layers.TimeDistributed(
                    keras.layers.Dense(num_classes, kernel_initializer="ones"),
                    input_shape=(timesteps, input_dim),
                ),
                keras.layers.Activation("softmax"),
            ]
        )

    # RMSprop's float32 sums in another order on the IPU: loose tolerance.
    assert_close(run(build()), stock(lambda: run(build())), rtol=5e-3)


@pytest.mark.follows("test_sample_weight_tensor")
def test_sample_weight_tensor():
    # The original computes the weighted loss with a sample weight tensor from a v1 iterator;
    # as a TF2 program: the weights come from the dataset.
    inputs = keras.Input(shape=(1,), name="input_layer")
    model = keras.Model(inputs=inputs, outputs=inputs)
    model.compile(loss="mean_absolute_error", optimizer="adam")
    weights = np.array([[0, 0.4, 1, 1], [2, 0.4, 0.3, 1]], np.float32)
    x, y = np.zeros((4, 1), np.float32), np.ones((4, 1), np.float32)
    for row, expected in zip(weights, [(0.4 + 1 + 1) / 4, (2 + 0.4 + 0.3 + 1) / 4], strict=True):
        dataset = tf.data.Dataset.from_tensors((x, y, row))
        assert_close(model.evaluate(dataset, verbose=0), expected, rtol=1e-6)


@pytest.mark.follows("test_trainable_warning")
def test_trainable_warning():
    rng = np.random.default_rng(0)
    x, y = rng.random((5, 3)), rng.random((5, 2))

    def run():
        model = keras.Sequential([keras.layers.Dense(2, input_dim=3, kernel_initializer="ones")])
        model.trainable = False
        model.compile("rmsprop", "mse")
        model.trainable = True
        model.train_on_batch(x, y)
        return model.get_weights()

    # The original asserts no warning (its `assertRaises(Warning)` checks nothing); the
    # weights after the step are those stock Keras gives.
    for ipu, ref in zip(run(), stock(run), strict=True):
        assert_close(ipu, ref, rtol=1e-5)


@pytest.mark.follows("test_training_and_eval_methods_on_symbolic_tensors_multi_io")
@pytest.mark.slow
def test_training_and_eval_methods_on_symbolic_tensors_multi_io():
    model = _two_in_two_out_model()
    model.compile(
        "rmsprop",
        "mse",
        metrics=["mae", keras.metrics.CategoricalAccuracy()],
        loss_weights=[1.0, 0.5],
    )
    x = [tf.zeros((32, 3)), tf.zeros((32, 3))]
    y = [tf.zeros((32, 4)), tf.zeros((32, 4))]
    x_dict = {"input_a": x[0], "input_b": x[1]}
    y_dict = {"dense": y[0], "dropout": y[1]}
    model.fit(x, y, epochs=1, steps_per_epoch=2, verbose=0)
    model.train_on_batch(x, y)
    model.fit(x_dict, y_dict, epochs=1, steps_per_epoch=2, verbose=0)
    model.fit(
        x_dict,
        y_dict,
        validation_data=(x_dict, y_dict),
        epochs=1,
        steps_per_epoch=2,
        validation_steps=2,
        verbose=0,
    )
    model.train_on_batch(x_dict, y_dict)
    # Zero inputs through a Dense: the outputs are its bias, whose zero target makes
    # RMSprop keep it at 0, so every loss is 0.
    results = model.evaluate(x, y, steps=2, verbose=0)
    assert_close(results[:3], [0.0, 0.0, 0.0])
    predictions = model.predict(x, steps=2, verbose=0)
    assert [p.shape for p in predictions] == [(32, 4), (32, 4)]
    assert_close(predictions[0], np.zeros((32, 4)))
    assert_close(model.test_on_batch(x, y)[0], 0.0)


@pytest.mark.follows("test_model_with_external_loss")
@pytest.mark.slow
def test_model_with_external_loss():
    rng = np.random.default_rng(0)
    x = rng.random((10, 3)).astype(np.float32)
    # Only the regularization losses: their sum is the loss.
    a = keras.Input(shape=(3,), name="input_a")
    dense = keras.layers.Dense(4, name="dense_1", kernel_regularizer="l1", bias_regularizer="l2")
    a_2 = dense(a)
    model = keras.Model(a, [a_2, keras.layers.Dropout(0.5, name="dropout")(a_2)])
    model.compile("rmsprop", None, metrics=["mae"])
    kernel, bias = dense.get_weights()
    expected = 0.01 * np.abs(kernel).sum() + 0.01 * np.square(bias).sum()
    assert_close(model.test_on_batch(x, None)[0], expected, rtol=1e-5)
    model.train_on_batch(x, None)
    model.fit(x, None, batch_size=5, verbose=0)
    model.evaluate(x, None, batch_size=5, verbose=0)
    # An external loss added to the model.
    a = keras.Input(shape=(3,), name="input_a")
    dense_1 = keras.layers.Dense(4, name="dense_1")
    dense_2 = keras.layers.Dense(4, name="dense_2")
    a_2, a_3 = dense_1(a), dense_2(a)
    model = keras.Model(a, [a_2, a_3])
    model.add_loss(tf.reduce_mean(a_3 + a_2))
    model.compile("rmsprop", None, metrics=["mae"])
    outputs = [layer(x).numpy() for layer in (dense_1, dense_2)]
    assert_close(model.test_on_batch(x, None)[0], np.mean(outputs[0] + outputs[1]), rtol=1e-5)
    model.train_on_batch(x, None)
    model.fit(x, None, batch_size=5, verbose=0)
    model.evaluate(x, None, batch_size=5, verbose=0)


@pytest.mark.follows("test_target_tensors")
def test_target_tensors():
    # `target_tensors` exist only in v1 graph Keras (the original's test builds a graph of its own).
    with tf.Graph().as_default(), tf.compat.v1.Session():
        model = keras.Sequential([keras.layers.Dense(4, input_shape=(4,), name="dense")])
        rng = np.random.default_rng(0)
        input_val, target_val = rng.random((10, 4)), rng.random((10, 4))
        target = backend.variable(target_val)
        for target_tensors in ([target], target, {"dense": target}):
            model.compile(optimizer="rmsprop", loss="mse", target_tensors=target_tensors)
            model.train_on_batch(input_val, None)
        with pytest.raises(TypeError):
            model.compile(optimizer="rmsprop", loss="mse", target_tensors=set())
        with pytest.raises(ValueError):
            model.compile(optimizer="rmsprop", loss="mse", target_tensors=[target, target])
        with pytest.raises(ValueError):
            model.compile(optimizer="rmsprop", loss="mse", target_tensors={"dense2": None})
        with pytest.raises(ValueError):
            model.compile(optimizer="rmsprop", loss="mse", target_tensors=[target])
            model.train_on_batch(input_val, target_val)
        # The loss is the mean squared error to the target variable.
        model.compile(
            optimizer=tf.compat.v1.train.GradientDescentOptimizer(0.0),
            loss="mse",
            target_tensors=[target],
        )
        prediction = model.predict(input_val)
        loss = model.train_on_batch(input_val, None)
        assert_close(loss, np.mean(np.square(prediction - target_val)), rtol=1e-5)


@pytest.mark.follows("test_model_custom_target_tensors")
def test_model_custom_target_tensors():
    with tf.Graph().as_default(), tf.compat.v1.Session():
        a = keras.Input(shape=(3,), name="input_a")
        b = keras.Input(shape=(3,), name="input_b")
        a_2 = keras.layers.Dense(4, name="dense_1")(a)
        b_2 = keras.layers.Dropout(0.5, name="dropout")(b)
        y = backend.placeholder([10, 4], name="y")
        y1 = backend.placeholder([10, 3], name="y1")
        y2 = backend.placeholder([7, 5], name="y2")
        model = keras.Model([a, b], [a_2, b_2])
        kwargs = {"metrics": [], "loss_weights": [1.0, 0.5], "sample_weight_mode": None}
        with pytest.raises(ValueError):
            model.compile("rmsprop", "mse", target_tensors=[y, y1, y2], **kwargs)
        model.compile("rmsprop", "mse", target_tensors=[y, y1], **kwargs)
        rng = np.random.default_rng(0)
        x = [rng.random((10, 3)), rng.random((10, 3))]
        targets = [rng.random((10, 4)), rng.random((10, 3))]
        weights = {"dense_1": rng.random((10,)), "dropout": rng.random((10,))}
        loss = model.train_on_batch(x, targets, weights)
        assert np.all(np.isfinite(loss))
        with pytest.raises(ValueError):
            model.compile("rmsprop", "mse", target_tensors={"does_not_exist": y2}, **kwargs)
        model.compile("rmsprop", "mse", target_tensors={"dense_1": y, "dropout": y1}, **kwargs)
        loss = model.train_on_batch(x, targets, weights)
        assert np.all(np.isfinite(loss))


def _multi_io_ones_model():
    inp_1 = keras.Input(shape=(1,), name="input_1")
    inp_2 = keras.Input(shape=(1,), name="input_2")
    shared = keras.layers.Dense(3, kernel_initializer="ones", trainable=False)
    out_1 = keras.layers.Dense(1, kernel_initializer="ones", name="output_1", trainable=False)
    out_2 = keras.layers.Dense(1, kernel_initializer="ones", name="output_2", trainable=False)
    return keras.Model([inp_1, inp_2], [out_1(shared(inp_1)), out_2(shared(inp_2))])


@pytest.mark.follows("test_metrics_valid_compile_input_formats")
@pytest.mark.parametrize(
    "metrics",
    [
        [keras.metrics.MeanSquaredError],
        [keras.metrics.MeanSquaredError, [keras.metrics.MeanSquaredError]],
        {"output_1": keras.metrics.MeanSquaredError, "output_2": [keras.metrics.MeanSquaredError]},
    ],
    ids=["list", "list_of_lists", "dict"],
)
def test_metrics_valid_compile_input_formats(metrics):
    def instances(spec):
        if isinstance(spec, list):
            return [instances(s) for s in spec]
        if isinstance(spec, dict):
            return {k: instances(v) for k, v in spec.items()}
        return spec()

    model = _multi_io_ones_model()
    model.compile(optimizer="rmsprop", loss="mse", metrics=instances(metrics))
    x = [np.ones((10, 1)), 2 * np.ones((10, 1))]
    y = [np.zeros((10, 1)), np.zeros((10, 1))]
    logs = model.evaluate(x, y, batch_size=5, verbose=0, return_dict=True)
    # All-ones kernels: the outputs are 3x, so the squared errors are 9 and 36.
    assert_close(logs["output_1_loss"], 9.0)
    assert_close(logs["output_2_loss"], 36.0)
    assert_close(logs["output_2_mean_squared_error"], 36.0)


@pytest.mark.follows("test_model_metrics_list")
def test_model_metrics_list():
    class LayerWithAddMetric(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1, kernel_initializer="ones")

        def __call__(self, inputs):
            outputs = self.dense(inputs)
            self.add_metric(tf.reduce_sum(outputs), name="metric_1", aggregation="mean")
            return outputs

    class LayerWithNestedAddMetricLayer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.layer = LayerWithAddMetric()

        def call(self, inputs):
            outputs = self.layer(inputs)
            self.add_metric(tf.reduce_sum(outputs), name="metric_2", aggregation="mean")
            return outputs

    x = keras.Input(shape=(1,))
    y = LayerWithNestedAddMetricLayer()(x)
    model = keras.Model(x, y)
    model.add_metric(tf.reduce_sum(y), name="metric_3", aggregation="mean")
    with pytest.raises(ValueError, match="Expected a symbolic Tensor for the metric value"):
        model.add_metric(keras.metrics.Mean()(y), name="metric_4")
    model.compile("sgd", loss="mse", metrics=[keras.metrics.Accuracy("metric_4")])
    history = model.fit(np.ones((10, 1)), np.ones((10, 1)), batch_size=10, verbose=0)
    assert [m.name for m in model.metrics] == [
        "loss",
        "metric_4",
        "metric_2",
        "metric_1",
        "metric_3",
    ]
    # Ones through an all-ones kernel and a zero bias: each sum is 10.
    assert_close(history.history["metric_3"][0], 10.0)


@pytest.mark.follows("test_model_metrics_list_in_call")
def test_model_metrics_list_in_call():
    class TestModel(keras.Model):
        def __init__(self):
            super().__init__(name="test_model")
            self.dense1 = keras.layers.Dense(2, kernel_initializer="ones")

        def call(self, x):
            self.add_metric(tf.reduce_sum(x), name="metric_1", aggregation="mean")
            return self.dense1(x)

    model = TestModel()
    model.compile(
        loss="mse",
        optimizer=tf.compat.v1.train.RMSPropOptimizer(0.01),
        metrics=[keras.metrics.Accuracy("acc")],
    )
    x, y = np.ones((10, 1)), np.ones((10, 2))
    history = model.fit(x, y, epochs=2, batch_size=5, validation_data=(x, y), verbose=0)
    assert [m.name for m in model.metrics] == ["loss", "acc", "metric_1"]
    assert_close(history.history["metric_1"][-1], 5.0)
    assert_close(history.history["val_metric_1"][-1], 5.0)


@pytest.mark.follows("test_multiple_add_metric_calls_layer")
def test_multiple_add_metric_calls_layer():
    class TestLayer(keras.layers.Layer):
        def __init__(self):
            super().__init__(name="test_layer")
            self.dense1 = keras.layers.Dense(2, kernel_initializer="ones")
            self.m1 = keras.metrics.Mean(name="m_1")
            self.m2 = [keras.metrics.Mean(name="m_2"), keras.metrics.Mean(name="m_3")]
            self.m3 = {
                "mean4": keras.metrics.Mean(name="m_4"),
                "mean5": keras.metrics.Mean(name="m_5"),
            }

        def call(self, x):
            self.add_metric(self.m2[0](x))
            self.add_metric(self.m2[1](x))
            self.add_metric(self.m1(x))
            self.add_metric(self.m3["mean4"](x))
            self.add_metric(self.m3["mean5"](x))
            self.add_metric(tf.reduce_sum(x), name="m_6", aggregation="mean")
            return self.dense1(x)

    layer = TestLayer()
    assert [m.name for m in layer.metrics] == ["m_1", "m_2", "m_3", "m_4", "m_5"]
    layer(np.ones((10, 10)))
    assert [m.name for m in layer.metrics] == ["m_1", "m_2", "m_3", "m_4", "m_5", "m_6"]
    assert_close(layer.metrics[-1].result(), 100.0)


@pytest.mark.follows("test_updates_standalone_layer")
@pytest.mark.parametrize("layer_class", [BareUpdateLayer, LambdaUpdateLayer, NestedUpdateLayer])
def test_updates_standalone_layer(layer_class):
    layer = layer_class()
    y = layer(np.ones((10, 10)))
    assert int(layer.counter.numpy()) == 1
    # The layer's output reads the counter after its update.
    assert_close(y, np.ones((10, 10)))


@pytest.mark.follows("test_trainable_false_standalone_layer")
def test_trainable_false_standalone_layer():
    layer = LambdaUpdateLayer()
    layer(np.ones((10, 10)))
    assert int(layer.counter.numpy()) == 1
    layer.trainable = False
    layer(np.ones((10, 10)))
    # A frozen layer's `add_update` does not run.
    assert int(layer.counter.numpy()) == 1
