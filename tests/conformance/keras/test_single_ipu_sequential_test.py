"""Conformance: graphcore/keras `keras/ipu/extensions/single_ipu/sequential_test.py`.

Stock Keras Sequential tests inside an IPUStrategy: layers added, popped and nested,
built late (by `fit` on arrays or datasets, `build`, a call), trained on tensors, its
updates disabled by `trainable`, serialized, and the stock errors (not a layer, several
outputs, a repeated name, a tf.Module without `__call__`). A Sequential model made in the
scope is the IPU extension's.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from single_ipu_checks import assert_close, stock
from tf_keras.ipu import SequentialExtension

pytestmark = pytest.mark.usefixtures("ipu_scope")


def _small_mlp(num_hidden, num_classes, input_dim=None):
    """Keras's `testing_utils.get_small_sequential_mlp`."""
    first = {"input_dim": input_dim} if input_dim else {}
    return keras.Sequential(
        [
            keras.layers.Dense(num_hidden, activation="relu", **first),
            keras.layers.Dense(num_classes, activation="softmax" if num_classes > 1 else "sigmoid"),
        ]
    )


def _compiled(model, **kwargs):
    model.compile(loss="mse", optimizer="rmsprop", **kwargs)
    return model


def _three_layers(model):
    model.add(keras.layers.Dense(1))
    model.add(keras.layers.Dropout(0.3, name="dp"))
    model.add(keras.layers.Dense(2, kernel_regularizer="l2", kernel_constraint="max_norm"))
    assert len(model.layers) == 3
    assert len(model.weights) == 2 * 2
    assert model.get_layer(name="dp").name == "dp"


@pytest.mark.follows("test_basic_methods")
def test_basic_methods():
    model = keras.Sequential()
    model.add(keras.layers.InputLayer((2,)))
    _three_layers(model)


@pytest.mark.follows("test_input_defined_first_layer")
def test_input_defined_first_layer():
    model = keras.Sequential()
    model.add(keras.Input(shape=(2,), name="input_layer"))
    _three_layers(model)


@pytest.mark.follows("test_single_layer_in_init")
def test_single_layer_in_init():
    assert len(keras.Sequential(keras.layers.Dense(1)).layers) == 1


@pytest.mark.follows("test_sequential_pop")
def test_sequential_pop():
    model = _compiled(_small_mlp(2, 2))
    assert isinstance(model, SequentialExtension)
    x, y = np.random.random((5, 2)), np.random.random((5, 2))
    model.fit(x, y, batch_size=5, epochs=1, verbose=0)
    model.pop()
    assert len(model.layers) == 1
    assert model.output_shape == (5, 2)
    _compiled(model)
    model.fit(x, np.random.random((5, 2)), batch_size=5, epochs=1, verbose=0)

    model = keras.Sequential()
    model.add(keras.layers.Dense(2))
    model.pop()
    assert model.layers == []
    assert model.outputs is None
    with pytest.raises(TypeError):
        keras.Sequential().pop()


def _check_deferred_build(fit):
    model = _compiled(_small_mlp(5, 2), metrics=[keras.metrics.CategoricalAccuracy()])
    assert len(model.layers) == 2
    with pytest.raises(ValueError, match="Weights for model .* have not yet been created"):
        len(model.weights)
    assert not model.built
    fit(model)
    assert model.built
    assert len(model.weights) == 2 * 2


@pytest.mark.follows("test_sequential_deferred_build_with_np_arrays")
def test_sequential_deferred_build_with_np_arrays():
    x, y = np.random.random((5, 3)), np.random.random((5, 2))
    _check_deferred_build(lambda model: model.fit(x, y, batch_size=5, epochs=1, verbose=0))


@pytest.mark.follows("test_sequential_deferred_build_with_dataset_iterators")
def test_sequential_deferred_build_with_dataset_iterators():
    dataset = tf.data.Dataset.from_tensor_slices((tf.ones((50, 3)), tf.zeros((50, 2))))
    dataset = dataset.repeat(100).batch(10, drop_remainder=True)
    _check_deferred_build(lambda model: model.fit(dataset, steps_per_epoch=10, verbose=0))


@pytest.mark.follows("test_training_and_eval_methods_on_symbolic_tensors")
@pytest.mark.slow
def test_training_and_eval_methods_on_symbolic_tensors():
    def model():
        keras.utils.set_random_seed(3)
        m = _small_mlp(10, 4)
        m.compile(optimizer="rmsprop", loss="categorical_crossentropy", metrics=["accuracy"])
        return m

    inputs, targets = tf.zeros(shape=(30, 3)), tf.ones(shape=(30, 4)) / 4

    def run():
        trained = model()
        history = trained.fit(inputs, targets, epochs=1, steps_per_epoch=30, verbose=0)
        evaluated = model().evaluate(inputs, targets, steps=2, verbose=0)
        predicted = model().predict(inputs, steps=2, verbose=0)
        validated = model().fit(
            inputs,
            targets,
            epochs=1,
            steps_per_epoch=2,
            verbose=0,
            validation_data=(inputs, targets),
            validation_steps=2,
        )
        return history.history["loss"], evaluated, predicted, validated.history["val_loss"]

    ours = run()
    theirs = stock(run)
    for our_value, their_value in zip(ours, theirs, strict=True):
        assert_close(our_value, their_value, rtol=1e-5)


@pytest.mark.follows("test_invalid_use_cases")
def test_invalid_use_cases():
    with pytest.raises(TypeError):
        keras.Sequential().add(None)


@pytest.mark.follows("test_nested_sequential_trainability")
def test_nested_sequential_trainability():
    inner = keras.Sequential([keras.layers.Dense(10, input_shape=(20,))])
    model = keras.Sequential([inner, keras.layers.Dense(2)])
    assert len(model.layers) == 2
    assert len(model.trainable_weights) == 4
    inner.trainable = False
    assert len(model.trainable_weights) == 2
    inner.trainable = True
    assert len(model.trainable_weights) == 4


@pytest.mark.follows("test_sequential_update_disabling")
def test_sequential_update_disabling():
    val_a = np.random.random((32, 4))
    val_out = np.random.random((32, 4))
    model = keras.Sequential([keras.layers.BatchNormalization(input_shape=(4,))])
    model.trainable = False
    model.compile("sgd", "mse")
    x1 = model.predict(val_a, verbose=0)
    model.train_on_batch(val_a, val_out)
    assert_close(model.predict(val_a, verbose=0), x1, atol=1e-7)
    model.trainable = True
    model.compile("sgd", "mse")
    model.train_on_batch(val_a, val_out)
    assert np.abs(np.sum(x1 - model.predict(val_a, verbose=0))) > 1e-5


@pytest.mark.follows("test_sequential_deferred_build_serialization")
def test_sequential_deferred_build_serialization():
    model = _compiled(_small_mlp(5, 2), metrics=[keras.metrics.CategoricalAccuracy()])
    assert not model.built
    model.train_on_batch(np.random.random((5, 3)), np.random.random((5, 2)))
    assert model.built
    new_model = keras.Sequential.from_config(model.get_config())
    _compiled(new_model, metrics=[keras.metrics.CategoricalAccuracy()])
    new_model.train_on_batch(np.random.random((5, 3)), np.random.random((5, 2)))
    assert len(new_model.layers) == 2
    assert len(new_model.weights) == 4


@pytest.mark.follows("test_sequential_shape_inference_deferred")
def test_sequential_shape_inference_deferred():
    output_shape = _small_mlp(4, 5).compute_output_shape((None, 7))
    assert tuple(output_shape.as_list()) == (None, 5)


@pytest.mark.follows("test_sequential_build_deferred")
def test_sequential_build_deferred():
    model = _small_mlp(4, 5)
    model.build((None, 10))
    assert model.built and len(model.weights) == 4
    model = _small_mlp(4, 3)
    model.add(_small_mlp(4, 5))
    model.build((None, 10))
    assert model.built and len(model.weights) == 8


@pytest.mark.follows("test_sequential_deferred_manual_build")
def test_sequential_deferred_manual_build():
    model = _small_mlp(4, 5)
    assert not model.built
    model(tf.zeros([1, 2]))
    assert model.built
    model.compile("rmsprop", loss="mse")
    loss = model.train_on_batch(np.zeros((1, 2)), np.zeros((1, 5)))
    assert_close(loss, 0.04)  # softmax of equal logits: 0.2 everywhere


@pytest.mark.follows("test_sequential_nesting")
def test_sequential_nesting():
    model = _small_mlp(4, 3)
    model.add(_small_mlp(4, 5))
    _compiled(model)
    x, y = np.random.random((2, 6)), np.random.random((2, 5))
    history = model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.follows("test_multi_output_layer_not_accepted")
def test_multi_output_layer_not_accepted():
    class MultiOutputLayer(keras.layers.Layer):
        def call(self, inputs):
            return inputs, inputs

    message = "should have a single output tensor"
    with pytest.raises(ValueError, match=message):
        keras.Sequential([MultiOutputLayer(input_shape=(3,))])
    with pytest.raises(ValueError, match=message):
        keras.Sequential([keras.layers.Dense(1, input_shape=(3,)), MultiOutputLayer()])
    with pytest.raises(ValueError, match=message):
        keras.Sequential([MultiOutputLayer()])(np.zeros((10, 10)))


@pytest.mark.follows("test_layer_add_after_compile_deferred")
def test_layer_add_after_compile_deferred():
    model = keras.Sequential([keras.layers.Dense(3)])
    assert not model.built
    model.compile("adam", loss="mse")
    model.fit(np.random.random((1, 3)), np.random.random((1, 3)), batch_size=1, verbose=0)
    assert model.built
    model.add(keras.layers.Dense(3))
    model.compile("adam", loss="mse")
    model.fit(np.random.random((1, 3)), np.random.random((1, 3)), batch_size=1, verbose=0)
    assert model.built
    assert len(model.weights) == 4


@pytest.mark.follows("test_sequential_layer_tracking")
def test_sequential_layer_tracking():
    def last(model):
        return list(model._flatten_layers(include_self=False, recursive=False))[-1]

    layer = keras.layers.Dense(1)
    model = keras.Sequential([layer])
    assert last(model) is layer
    model.a = [keras.layers.Dense(3)]  # not a layer of the model
    assert last(model) is layer
    layer2 = keras.layers.Dense(2)
    model.add(layer2)
    assert last(model) is layer2
    model.a = [keras.layers.Dense(3)]
    assert last(model) is layer2
    model.pop()
    assert last(model) is layer


@pytest.mark.follows("test_config_preserves_input_layer")
def test_config_preserves_input_layer():
    model = keras.Sequential(
        [
            keras.Input((None,), name="my_embedding_input", dtype="int32"),
            keras.layers.Embedding(32, 32),
            keras.layers.Dense(3),
        ]
    )
    new_model = keras.Sequential.from_config(model.get_config())
    assert new_model.built
    layers = list(new_model._flatten_layers(include_self=False, recursive=False))
    assert layers[0].dtype == "int32"
    assert layers[0].name == "my_embedding_input"


@pytest.mark.follows("test_name_unicity")
def test_name_unicity():
    model = keras.Sequential()
    model.add(keras.layers.Dense(3, name="specific_name"))
    with pytest.raises(ValueError, match="should have unique names"):
        model.add(keras.layers.Dense(3, name="specific_name"))


class _ScaleModule(tf.Module):
    def __init__(self):
        self.v = tf.Variable(2.0)

    def __call__(self, x):
        return self.v * x


@pytest.mark.follows("test_tf_module_call")
@pytest.mark.slow
def test_tf_module_call():
    module = _ScaleModule()
    model = keras.Sequential()
    model.add(module)
    model.compile("sgd", "mse")
    x, y = np.ones((10, 1)), np.ones((10, 1))
    model.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
    assert len(model.trainable_variables) == 1
    # Each step: v -= 0.01 * 2 (v - 1) for the mse of v*1 against 1, five steps from 2.
    assert_close(module.v.numpy(), 1 + 0.98**5, rtol=1e-5)


@pytest.mark.follows("test_tf_module_error")
def test_tf_module_error():
    class MyModule(tf.Module):
        def __init__(self):
            self.v = tf.Variable(2.0)

    with pytest.raises(ValueError, match="is not defined"):
        keras.Sequential().add(MyModule())


@pytest.mark.follows("test_defun_on_call")
def test_defun_on_call():
    class MySequential(keras.Sequential):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.call = tf.function(self.call)

    model = MySequential()
    model.add(keras.layers.Dense(4, activation="relu"))
    model.add(keras.layers.Dense(5, activation="softmax"))
    _compiled(model)
    x, y = np.random.random((2, 6)), np.random.random((2, 5))
    history = model.fit(x, y, epochs=1, batch_size=2, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.follows("test_build_before_fit")
def test_build_before_fit():
    model = _compiled(_small_mlp(4, 5))
    model.build((None, 6))
    x, y = np.random.random((2, 6)), np.random.random((2, 5))
    history = model.fit(x, y, epochs=1, batch_size=2, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.follows("test_build_empty_network")
def test_build_empty_network():
    x, y = np.random.random((2, 6)), np.random.random((2, 5))
    model = keras.Sequential()
    model.build((None, 6))
    assert model.built
    model.add(keras.layers.Dense(5, input_shape=(6,)))
    _compiled(model)
    model.fit(x, y, batch_size=2, verbose=0)
    model.pop()
    assert not model.built
    model.build((None, 6))
    assert model.built
