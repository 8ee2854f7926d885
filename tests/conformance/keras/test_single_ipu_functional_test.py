"""Conformance: graphcore/keras `keras/ipu/extensions/single_ipu/functional_test.py`.

Stock Keras functional-model tests inside an IPUStrategy: masks (of Masking, of a Keras
input given to an RNN), activity regularization through a nested model, layers shared
at several depths (predictions kept through `from_config`), a training argument fixed at
construction, call arguments from other layers, models called on dicts, losses added
outside `call` (trained the same as the model's copy from its config), which weights an
unbuilt model has, 1-D and 2-D inputs conformed to the Input, and the input errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from single_ipu_checks import assert_close, small_mlp
from tf_keras import backend

pytestmark = pytest.mark.usefixtures("ipu_scope")


@pytest.mark.follows("test_basic_masking")
def test_basic_masking():
    a = keras.Input(shape=(10, 32), name="input_a")
    model = keras.Model(a, keras.layers.Masking()(a))
    assert model.output_mask.shape.as_list() == [None, 10]


@pytest.mark.follows("test_activity_regularization_with_model_composition")
def test_activity_regularization_with_model_composition():
    net_a_input = keras.Input((2,))
    net_a = keras.layers.Dense(
        2, kernel_initializer="ones", use_bias=False, activity_regularizer=tf.reduce_sum
    )(net_a_input)
    model_a = keras.Model([net_a_input], [net_a])
    net_b_input = keras.Input((2,))
    model_b = keras.Model([net_b_input], [model_a(net_b_input)])
    model_b.compile(optimizer="sgd", loss=None)
    loss = model_b.evaluate(np.ones((1, 2), np.int32), batch_size=1, verbose=0)
    assert loss == 4.0  # two outputs of 1 + 1


def _check_from_config_predicts_the_same(model, x):
    output = model.predict(x, batch_size=5, verbose=0)
    copy = keras.Model.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    assert_close(copy.predict(x, batch_size=5, verbose=0), output, atol=1e-6)
    return output


@pytest.mark.follows("test_layer_sharing_at_heterogenous_depth")
def test_layer_sharing_at_heterogenous_depth():
    x = keras.Input(shape=(5,))
    a = keras.layers.Dense(5, name="A")
    b = keras.layers.Dense(5, name="B")
    model = keras.Model(x, a(b(a(b(x)))))
    x_val = np.random.randint(0, 3, (10, 5)).astype(np.int32)
    output = _check_from_config_predicts_the_same(model, x_val)
    ka, ba = model.get_layer("A").get_weights()
    kb, bb = model.get_layer("B").get_weights()
    expected = x_val
    for _ in range(2):
        expected = (expected @ kb + bb) @ ka + ba
    assert_close(output, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.follows("test_layer_sharing_at_heterogenous_depth_with_concat")
def test_layer_sharing_at_heterogenous_depth_with_concat():
    input_layer = keras.Input(shape=(16, 9, 3))
    a = keras.layers.Dense(3, name="dense_A")
    b = keras.layers.Dense(3, name="dense_B")
    c = keras.layers.Dense(3, name="dense_C")
    output = keras.layers.concatenate([b(a(input_layer)), a(c(input_layer))])
    model = keras.Model(inputs=input_layer, outputs=output)
    x_val = np.random.randint(0, 3, (10, 16, 9, 3)).astype(np.int32)
    _check_from_config_predicts_the_same(model, x_val)


@pytest.mark.follows("test_explicit_training_argument")
def test_explicit_training_argument():
    a = keras.Input(shape=(2,))
    base_model = keras.Model(a, keras.layers.Dropout(0.5)(a))
    a = keras.Input(shape=(2,))
    model = keras.Model(a, base_model(a, training=False))
    x = np.ones((100, 2))
    y = np.ones((100, 2))
    model.compile(optimizer="sgd", loss="mse")
    assert model.train_on_batch(x, y) == 0  # inference mode: the output is the input
    a = keras.Input(shape=(2,))
    model = keras.Model(a, base_model(a, training=True))
    predictions = model.predict(x, batch_size=1, verbose=0)
    assert np.min(predictions) == 0.0  # at least one unit dropped
    assert np.max(predictions) == 2.0  # the others scaled by 1 / (1 - 0.5)


def _fit_masked_then_unmasked(model):
    model.compile("sgd", "mse")
    x = np.ones((10, 5, 10))
    y = np.zeros((10, 8))
    masked = model.fit(x=[x, np.zeros((10, 5))], y=y, batch_size=2, verbose=0)
    assert masked.history["loss"][0] == 0.0  # all masked: the RNN outputs zeros
    unmasked = model.fit(x=[x, np.ones((10, 5))], y=y, batch_size=2, verbose=0)
    assert unmasked.history["loss"][0] > 0.0


@pytest.mark.follows("test_mask_derived_from_keras_layer")
@pytest.mark.slow
def test_mask_derived_from_keras_layer():
    inputs = keras.Input((5, 10))
    mask = keras.Input((5,))
    outputs = keras.layers.RNN(keras.layers.LSTMCell(8))(inputs, mask=mask)
    model = keras.Model([inputs, mask], outputs)
    _fit_masked_then_unmasked(model)
    _fit_masked_then_unmasked(keras.Model.from_config(model.get_config()))


class MyAdd(keras.layers.Layer):
    def call(self, x1, x2):
        return x1 + x2


@pytest.mark.follows("test_call_arg_derived_from_keras_layer")
def test_call_arg_derived_from_keras_layer():
    input1 = keras.Input(10)
    input2 = keras.Input(10)
    model = keras.Model([input1, input2], MyAdd()(input1, input2))

    def check(model):
        model.compile("sgd", "mse")
        history = model.fit(
            x=[3 * np.ones((10, 10)), 7 * np.ones((10, 10))],
            y=10 * np.ones((10, 10)),
            batch_size=2,
            verbose=0,
        )
        assert history.history["loss"][0] == 0.0  # the second input was added to the first

    check(model)
    check(keras.Model.from_config(model.get_config(), custom_objects={"MyAdd": MyAdd}))


@pytest.mark.follows("test_multi_output_model_with_none_masking")
def test_multi_output_model_with_none_masking():
    i = keras.Input(shape=(3, 2, 1))
    o = keras.layers.Lambda(function=lambda x: [x * 0.2, x * 0.3], output_shape=lambda s: [s, s])(i)
    assert backend.int_shape(o[0]) == (None, 3, 2, 1)
    assert backend.int_shape(o[1]) == (None, 3, 2, 1)
    model = keras.Model(i, keras.layers.add(o))
    i2 = keras.Input(shape=(3, 2, 1))
    model2 = keras.Model(i2, model(i2))
    x = np.random.random((4, 3, 2, 1))
    out = model2.predict(x, batch_size=4, verbose=0)
    assert out.shape == (4, 3, 2, 1)
    assert_close(out, x * 0.2 + x * 0.3, atol=1e-4)


@pytest.mark.follows("test_sequential_as_downstream_of_masking_layer")
def test_sequential_as_downstream_of_masking_layer():
    inputs = keras.Input(shape=(3, 4))
    x = keras.layers.Masking(mask_value=0.0, input_shape=(3, 4))(inputs)
    s = keras.Sequential([keras.layers.Dense(5, input_shape=(4,))])
    model = keras.Model(inputs=inputs, outputs=keras.layers.TimeDistributed(s)(x))
    model.compile(optimizer="rmsprop", loss="mse")
    model_input = np.random.randint(low=1, high=5, size=(10, 3, 4)).astype("float32")
    for i in range(4):
        model_input[i, i:, :] = 0.0
    history = model.fit(
        model_input, np.random.random((10, 3, 5)), epochs=1, batch_size=1, verbose=0
    )
    # No check of the loss's value, as the original: the first sample is masked whole, and
    # stock Keras's loss is NaN here (XLA's is not).
    assert len(history.history["loss"]) == 1
    mask = model.layers[1].compute_mask(tf.constant(model_input))
    assert_close(mask, np.any(model_input, axis=-1))


@pytest.mark.follows("test_dict_mapping_input")
def test_dict_mapping_input():
    class ReturnFirst(keras.layers.Layer):
        def call(self, inputs):
            b, _ = inputs
            return b

    b = keras.Input(shape=(10,), name="b")
    a = keras.Input(shape=(10,), name="a")
    outputs = ReturnFirst()([b, a])
    b_val, a_val = tf.ones((10, 10)), tf.zeros((10, 10))
    for model in (keras.Model([b, a], outputs), keras.Model([a, b], outputs)):
        assert_close(model({"a": a_val, "b": b_val}), b_val)


@pytest.mark.follows("test_dict_mapping_single_input")
def test_dict_mapping_single_input():
    b = keras.Input(shape=(1,), name="b")
    model = keras.Model(b, b * 2)
    result = model({"a": tf.ones((1, 10)), "b": tf.ones((1, 1))})
    assert result.shape.as_list() == [1, 1]  # 'b' used, 'a' ignored
    assert_close(result, [[2.0]])


@pytest.mark.follows("test_nested_dict_mapping")
def test_nested_dict_mapping():
    a, b, c, d = (keras.Input(shape=(1,), dtype="int32", name=n) for n in "abcd")
    model = keras.Model({"a": (a, b), "c": (c, d)}, 1000 * a + 100 * b + 10 * c + d)
    values = [k * tf.ones((1, 1), dtype="int32") for k in (1, 2, 3, 4)]
    result = model({"a": (values[0], values[1]), "c": (values[2], values[3])})
    assert result.numpy().tolist() == [[1234]]  # flattened in the right order


def _check_config_copy_trains_the_same(model, x, y, loss):
    initial_weights = model.get_weights()
    model.compile("sgd", loss)
    model.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
    copy = model.from_config(model.get_config())
    copy.compile("sgd", loss)
    copy.set_weights(initial_weights)
    copy.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
    for ours, theirs in zip(model.get_weights(), copy.get_weights(), strict=True):
        assert_close(ours, theirs, rtol=1e-5)
    return copy


@pytest.mark.follows("test_add_loss_outside_call_only_loss")
def test_add_loss_outside_call_only_loss():
    inputs = keras.Input((10,))
    outputs = keras.layers.Dense(1)(keras.layers.Dense(10)(inputs))
    model = keras.Model(inputs, outputs)
    model.add_loss(tf.reduce_mean(outputs))
    assert len(model.losses) == 1
    copy = _check_config_copy_trains_the_same(model, np.ones((10, 10)), None, None)
    assert len(copy.layers) == 5  # the TFOpLayer and the AddLoss layer are serialized


@pytest.mark.follows("test_add_loss_outside_call_multiple_losses")
def test_add_loss_outside_call_multiple_losses():
    inputs = keras.Input((10,))
    x1 = keras.layers.Dense(10)(inputs)
    x2 = keras.layers.Dense(10)(x1)
    outputs = keras.layers.Dense(1)(x2)
    model = keras.Model(inputs, outputs)
    model.add_loss(tf.reduce_sum(x1 * x2))
    model.add_loss(tf.reduce_mean(outputs))
    assert len(model.losses) == 2
    _check_config_copy_trains_the_same(model, np.ones((10, 10)), np.ones((10, 1)), "mse")


@pytest.mark.follows("test_add_loss_crossentropy_backtracking")
@pytest.mark.parametrize(
    ("units", "activation", "label_shape", "label_dtype", "loss"),
    [
        (1, "sigmoid", (1,), "float32", keras.losses.binary_crossentropy),
        (2, "softmax", (2,), "float32", keras.losses.categorical_crossentropy),
        (2, "softmax", (1,), "int32", keras.losses.sparse_categorical_crossentropy),
    ],
)
def test_add_loss_crossentropy_backtracking(units, activation, label_shape, label_dtype, loss):
    inputs = keras.Input((2,))
    labels = keras.Input(label_shape, dtype=label_dtype)
    outputs = keras.layers.Dense(units, activation=activation)(inputs)
    model = keras.Model([inputs, labels], outputs)
    model.add_loss(loss(labels, outputs))
    model.compile("adam")
    x = np.random.random((2, 2))
    if label_dtype == "int32":
        y = np.array([[0], [1]], np.int32)
    else:
        y = np.random.random((2, *label_shape))
    history = model.fit([x, y], batch_size=2, verbose=0)
    predictions = model.predict([x, y], batch_size=2, verbose=0)
    expected = np.mean(loss(tf.constant(y), tf.constant(predictions)).numpy())
    assert np.isfinite(history.history["loss"][0])
    assert_close(model.evaluate([x, y], batch_size=2, verbose=0), expected, rtol=1e-5)


@pytest.mark.follows("test_functional_model")
def test_functional_model():
    inputs = keras.Input((10,))
    x = keras.layers.Dense(10)(keras.layers.Dense(10)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(1)(x))
    assert len(model.weights) == 6


@pytest.mark.follows("test_sequential_model_with_input_shape")
def test_sequential_model_with_input_shape():
    model = keras.Sequential(
        [keras.layers.Dense(10, input_shape=(10,)), keras.layers.Dense(10), keras.layers.Dense(1)]
    )
    assert len(model.weights) == 6


@pytest.mark.follows("test_sequential_model_without_input_shape")
def test_sequential_model_without_input_shape():
    model = keras.Sequential(
        [keras.layers.Dense(10), keras.layers.Dense(10), keras.layers.Dense(1)]
    )
    with pytest.raises(ValueError, match="Weights for model .* have not yet been created"):
        _ = model.weights


@pytest.mark.follows("test_subclass_model_with_build_method")
def test_subclass_model_with_build_method():
    class SubclassModel(keras.Model):
        def build(self, input_shape):
            self.w = self.add_weight(shape=input_shape[-1], initializer="ones")

        def call(self, inputs):
            return inputs * self.w

    model = SubclassModel()
    with pytest.raises(ValueError, match="Weights for model .* have not yet been created"):
        _ = model.weights
    model(keras.Input((10,)))
    assert len(model.weights) == 1


@pytest.mark.follows("test_subclass_model_without_build_method")
def test_subclass_model_without_build_method():
    class SubclassModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.w = self.add_weight(shape=(), initializer="ones")

        def call(self, inputs):
            return inputs * self.w

    assert len(SubclassModel().weights) == 1


@pytest.mark.follows("test_2d_inputs_squeezed_to_1d")
def test_2d_inputs_squeezed_to_1d():
    input_1d = keras.Input(shape=())
    net = keras.Model(input_1d, input_1d * 2.0)
    assert net(np.ones((10, 1))).shape.rank == 1


@pytest.mark.follows("test_1d_inputs_expanded_to_2d")
def test_1d_inputs_expanded_to_2d():
    input_1d = keras.Input(shape=(1,))
    net = keras.Model(input_1d, input_1d * 2.0)
    assert net(np.ones((10,))).shape.rank == 2


@pytest.mark.follows("test_training_passed_during_construction")
def test_training_passed_during_construction():
    def _call(inputs, training):
        if training is None:
            return inputs * -1.0
        return inputs if training else inputs * 0.0

    class MyLayer(keras.layers.Layer):
        def call(self, inputs, training=True):
            return _call(inputs, training)

    my_layer = MyLayer()
    x = np.ones((1, 10))

    def network(**construction):
        inputs = keras.Input(10)
        return keras.Model(inputs, my_layer(inputs, **construction))

    for fixed in (True, False):  # a value given at construction wins
        net = network(training=fixed)
        for call in ({"training": True}, {"training": False}, {}):
            assert_close(net(x, **call), _call(x, fixed))
    for construction in ({}, {"training": None}):  # else the call's, or the layer's default
        net = network(**construction)
        assert_close(net(x, training=True), _call(x, True))
        assert_close(net(x, training=False), _call(x, False))
        assert_close(net(x), _call(x, True))


@pytest.mark.follows("test_input_error")
def test_input_error():
    inputs = keras.Input((10,))
    with pytest.raises(TypeError, match="Keyword argument not understood:.*input"):
        keras.Model(input=inputs, outputs=keras.layers.Dense(10)(inputs))


@pytest.mark.follows("test_output_error")
def test_output_error():
    inputs = keras.Input((10,))
    with pytest.raises(TypeError, match="Keyword argument not understood:.*output"):
        keras.Model(inputs=inputs, output=keras.layers.Dense(10)(inputs))


@pytest.mark.follows("test_input_spec")
def test_input_spec():
    inputs = keras.Input((10,))
    model = keras.Model(inputs, keras.layers.Dense(10)(inputs))
    with pytest.raises(ValueError, match=r".*expected shape=.*"):
        model(np.zeros((3, 11)))


def _two_input_model(inputs_of):
    input_1 = keras.Input((10,), name="1")
    input_2 = keras.Input((5,), name="2")
    x = keras.layers.Concatenate()([input_1, input_2])
    return keras.Model(inputs_of(input_1, input_2), keras.layers.Dense(10)(x))


@pytest.mark.follows("test_input_spec_list_of_inputs")
def test_input_spec_list_of_inputs():
    model = _two_input_model(lambda a, b: [a, b])
    with pytest.raises(ValueError, match=r".*expects 2 input.*"):
        model(np.zeros((3, 10)))
    with pytest.raises(ValueError, match=r".*expects 2 input.*"):
        model([np.zeros((3, 10)), np.zeros((3, 5)), np.zeros((3, 10))])
    with pytest.raises(ValueError, match=r".*expected shape=.*"):
        model([np.zeros((3, 10)), np.zeros((3, 6))])
    with pytest.raises(ValueError, match=r"Missing data for input.*"):
        model({"1": np.zeros((3, 10))})
    with pytest.raises(ValueError, match=r".*expected shape=.*"):
        model({"1": np.zeros((3, 10)), "2": np.zeros((3, 6))})


@pytest.mark.follows("test_input_spec_dict")
def test_input_spec_dict():
    model = _two_input_model(lambda a, b: {"1": a, "2": b})
    with pytest.raises(ValueError, match=r"Missing data for input.*"):
        model({"1": np.zeros((3, 10))})
    with pytest.raises(ValueError, match=r".*expected shape=.*"):
        model({"1": np.zeros((3, 10)), "2": np.zeros((3, 6))})


@pytest.mark.follows("test_get_layer")
def test_get_layer():
    x = keras.Input(shape=(32,))
    dense_a = keras.layers.Dense(4, name="dense_a")
    dense_b = keras.layers.Dense(2, name="dense_b")
    network = keras.Model(x, dense_b(dense_a(x)), name="dense_network")
    assert network.get_layer(index=1) is dense_a
    with pytest.raises(
        ValueError, match="Was asked to retrieve layer at index 3 but model only has 3 layers."
    ):
        network.get_layer(index=3)
    with pytest.raises(ValueError, match="Provide only a layer name or a layer index"):
        network.get_layer(index=1, name="dense_b")
    with pytest.raises(ValueError, match="Provide either a layer name or layer index."):
        network.get_layer()
    assert network.get_layer(name="dense_a") is dense_a
    with pytest.raises(ValueError, match="No such layer: dense_c."):
        network.get_layer(name="dense_c")


@pytest.mark.follows("test_constant_initializer_with_numpy")
def test_constant_initializer_with_numpy():
    initializer = tf.compat.v1.constant_initializer(np.ones((3, 2)))
    model = keras.Sequential(
        [keras.layers.Dense(2, input_shape=(3,), kernel_initializer=initializer),
         keras.layers.Dense(3)]
    )  # fmt: skip
    model.compile(loss="mse", optimizer="sgd", metrics=["acc"])
    restored = keras.models.model_from_json(model.to_json())
    assert [layer.units for layer in restored.layers] == [2, 3]


@pytest.mark.follows("test_subclassed_error_if_init_not_called")
def test_subclassed_error_if_init_not_called():
    class MyNetwork(keras.Model):
        def __init__(self):
            self._foo = [keras.layers.Dense(10), keras.layers.Dense(10)]

    with pytest.raises(RuntimeError, match="forgot to call"):
        MyNetwork()


@pytest.mark.follows("test_int_input_shape")
def test_int_input_shape():
    assert keras.Input(10).shape.as_list() == [None, 10]
    assert keras.Input(batch_size=20, shape=5).shape.as_list() == [20, 5]


@pytest.mark.follows("test_model_initialization")
def test_model_initialization():
    inputs = keras.Input(shape=(32,))
    outputs = keras.layers.Dense(4)(inputs)
    for extra in ({"dtype": "int64"}, {"dynamic": False}):
        with pytest.raises(TypeError, match="Keyword argument not understood"):
            keras.Model(inputs, outputs, name="m", trainable=False, **extra)
    model = keras.Model(inputs, outputs, name="m", trainable=False)
    assert model.name == "m" and not model.trainable and not model.dynamic

    class SubclassModel(keras.Model):
        pass

    model = SubclassModel(name="subclassed", trainable=True, dtype="int64", dynamic=True)
    assert model.name == "subclassed" and model.dynamic and model.trainable
    w = model.add_weight("w", [], initializer=tf.compat.v1.constant_initializer(1))
    assert w.dtype == tf.int64


@pytest.mark.follows("test_disconnected_inputs")
def test_disconnected_inputs():
    a = keras.Input(shape=[200], name="a")
    b = keras.Input(shape=[10], name="b")
    net = keras.Model(inputs=[a, b], outputs=[keras.layers.Dense(units=10)(a)])
    net2 = keras.Model.from_config(net.get_config())
    assert len(net2.inputs) == 2
    assert [net2.layers[0].name, net2.layers[1].name] == ["a", "b"]


@pytest.mark.follows("test_model_construction_in_tf_function")
def test_model_construction_in_tf_function():
    built = {"model": None}

    @tf.function
    def fn(x):
        if built["model"] is None:
            inputs = keras.Input(10)
            built["model"] = keras.Model(inputs, keras.layers.Dense(1)(inputs))
        return built["model"](x)

    assert fn(tf.ones((10, 10))).shape.as_list() == [10, 1]


@pytest.mark.follows("testSimpleNetworkBuilding")
def test_simple_network_building():
    inputs = keras.Input(shape=(32,))
    assert inputs.dtype.name == "float32" and inputs.shape.as_list() == [None, 32]
    x = keras.layers.Dense(2)(inputs)
    assert x.shape.as_list() == [None, 2]
    network = keras.Model(inputs, keras.layers.Dense(4)(x))
    assert network(tf.constant(np.random.random((10, 32)), tf.float32)).shape.as_list() == [10, 4]


@pytest.mark.follows("testMultiIONetworkBuilding")
def test_multi_io_network_building():
    class AddLayer(keras.layers.Layer):
        def call(self, inputs):
            return inputs[0] + inputs[1]

    input_a, input_b = keras.Input(shape=(32,)), keras.Input(shape=(16,))
    a = keras.layers.Dense(16)(input_a)
    c = keras.layers.Dense(2)(AddLayer()([a, input_b]))
    network = keras.Model([input_a, input_b], [a, c])
    outputs = network([tf.ones((10, 32)), tf.ones((10, 16))])
    assert [o.shape.as_list() for o in outputs] == [[10, 16], [10, 2]]


class _DotWithOnes(keras.layers.Layer):
    """x @ ones((3, 4)); a second input, when given, is added to the product."""

    def build(self, input_shape):
        self.w = tf.ones(shape=(3, 4))

    def call(self, inputs, training=None):
        if isinstance(inputs, (list, tuple)):
            product = backend.dot(inputs[0], self.w)
            return [product, product + inputs[1]]
        return backend.dot(inputs, self.w)


@pytest.mark.follows("testSingleInputCase")
@pytest.mark.follows("testTrainingArgument")
@pytest.mark.parametrize("call_kwargs", [{}, {"training": False}])
def test_single_input_shape_inference(call_kwargs):
    layer = _DotWithOnes()
    assert layer.compute_output_shape((None, 3)).as_list() == [None, 4]
    assert layer.built  # compute_output_shape builds it
    assert layer.compute_output_shape((6, 3)).as_list() == [6, 4]
    inputs = keras.Input(shape=(3,))
    model = keras.Model(inputs, layer(inputs, **call_kwargs))
    x = np.random.random((2, 3))
    predicted = model.predict(x, batch_size=2, verbose=0)
    assert_close(predicted, x @ np.ones((3, 4)), rtol=1e-5)


@pytest.mark.follows("testMultiInputOutputCase")
def test_multi_input_output_case():
    input_a, input_b = keras.Input(shape=(3,)), keras.Input(shape=(4,))
    output_a, output_b = _DotWithOnes()([input_a, input_b])
    model = keras.Model([input_a, input_b], [output_a, output_b])
    a, b = np.random.random((2, 3)), np.random.random((2, 4))
    out_a, out_b = model.predict([a, b], batch_size=2, verbose=0)
    assert_close(out_a, a @ np.ones((3, 4)), rtol=1e-5)
    assert_close(out_b, a @ np.ones((3, 4)) + b, rtol=1e-5)


class _ConvBlock(keras.Model):
    def __init__(self, pool=True):
        super().__init__()
        self.conv1 = keras.layers.Conv2D(8, 3)
        self.pool = keras.layers.GlobalAveragePooling2D() if pool else None
        self.fc = keras.layers.Dense(3) if pool else None

    def call(self, x):
        x = self.conv1(x)
        return self.fc(self.pool(x)) if self.pool else x


def _check_none_shape_build(model):
    model.build(tf.TensorShape((None, None, None, 1)))
    assert model.built and model.weights
    assert model(tf.ones((1, 10, 10, 1))).shape == (1, 3)


@pytest.mark.follows("testNoneInShape")
def test_none_in_shape():
    _check_none_shape_build(_ConvBlock())


@pytest.mark.follows("testNoneInShapeWithCompoundModel")
def test_none_in_shape_with_compound_model():
    class CompoundModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.block = _ConvBlock()

        def call(self, x):
            return self.block(x)

    _check_none_shape_build(CompoundModel())


@pytest.mark.follows("testNoneInShapeWithFunctionalAPI")
def test_none_in_shape_with_functional_api():
    input_layer = keras.Input(shape=(None, None, 1))
    x = keras.layers.GlobalAveragePooling2D()(_ConvBlock(pool=False)(input_layer))
    _check_none_shape_build(keras.Model(inputs=input_layer, outputs=keras.layers.Dense(3)(x)))


@pytest.mark.follows("test_nested_inputs_network")
def test_nested_inputs_network():
    inputs = {"x1": keras.Input(shape=(1,)), "x2": keras.Input(shape=(1,))}
    network = keras.Model(inputs, keras.layers.Add()([inputs["x1"], inputs["x2"]]))
    network = keras.Model.from_config(network.get_config())
    assert_close(network({"x1": tf.ones((1, 1)), "x2": tf.ones((1, 1))}), [[2.0]])
    x = {"x1": np.array([[1.0], [2.0]]), "x2": np.array([[3.0], [5.0]])}
    assert_close(network.predict(x, batch_size=2, verbose=0), [[4.0], [7.0]])
    shape = network.compute_output_shape({"x1": (None, 1), "x2": (None, 1)})
    assert shape.as_list() == [None, 1]


@pytest.mark.follows("test_nested_outputs_network")
def test_nested_outputs_network():
    inputs = keras.Input(shape=(1,))
    outputs = {
        "x+x": keras.layers.Add()([inputs, inputs]),
        "x*x": keras.layers.Multiply()([inputs, inputs]),
    }
    network = keras.Model.from_config(keras.Model(inputs, outputs).get_config())
    result = network.predict(np.array([[1.0], [3.0]]), batch_size=2, verbose=0)
    assert_close(result["x+x"], [[2.0], [6.0]])
    assert_close(result["x*x"], [[1.0], [9.0]])
    shape = network.compute_output_shape((None, 1))
    assert shape["x+x"].as_list() == [None, 1] and shape["x*x"].as_list() == [None, 1]


@pytest.mark.follows("test_nested_network_inside_network")
def test_nested_network_inside_network():
    inner_inputs = {"x1": keras.Input(shape=(1,)), "x2": keras.Input(shape=(1,))}
    inner_outputs = {
        "x1+x2": keras.layers.Add()([inner_inputs["x1"], inner_inputs["x2"]]),
        "x1*x2": keras.layers.Multiply()([inner_inputs["x1"], inner_inputs["x2"]]),
    }
    inner = keras.Model(inner_inputs, inner_outputs)
    inputs = [keras.Input(shape=(1,)), keras.Input(shape=(1,))]
    middle = inner({"x1": inputs[0], "x2": inputs[1]})
    network = keras.Model(inputs, keras.layers.Add()([middle["x1+x2"], middle["x1*x2"]]))
    network = keras.Model.from_config(network.get_config())
    x1, x2 = np.array([[1.0], [2.0]]), np.array([[1.0], [3.0]])
    # (x1 + x2) + (x1 * x2)
    assert_close(network.predict([x1, x2], batch_size=2, verbose=0), [[3.0], [11.0]])
    assert network.compute_output_shape([(None, 1), (None, 1)]).as_list() == [None, 1]


def _check_trainable_weights_follow_trainable(model, layer):
    weights = model.weights

    def same(ours, theirs):
        return len(ours) == len(theirs) and all(a is b for a, b in zip(ours, theirs, strict=True))

    assert same(model.trainable_weights, weights) and model.non_trainable_weights == []
    model.trainable = False
    assert model.trainable_weights == [] and same(model.non_trainable_weights, weights)
    model.trainable = True
    assert same(model.trainable_weights, weights) and model.non_trainable_weights == []
    layer.trainable = False
    assert model.trainable_weights == [] and same(model.non_trainable_weights, weights)


@pytest.mark.follows("test_trainable_weights")
def test_trainable_weights():
    a = keras.Input(shape=(2,))
    model = keras.Model(a, keras.layers.Dense(1)(a))
    _check_trainable_weights_follow_trainable(model, model.layers[1])
    model = keras.Sequential([keras.layers.Dense(1, input_dim=2)])
    _check_trainable_weights_follow_trainable(model, model.layers[0])


@pytest.mark.follows("test_multi_output_layer_output_names")
def test_multi_output_layer_output_names():
    class _MultiOutput(keras.layers.Layer):
        def call(self, x):
            return x + 1.0, x + 2.0

    inp = keras.Input(name="inp", shape=(None,), dtype=tf.float32)
    model = keras.Model(inp, _MultiOutput(name="out")(inp))
    assert model.output_names == ["out", "out_1"]
    assert_close(model(1.0), [2.0, 3.0])


@pytest.mark.follows("test_default_model_name")
def test_default_model_name():
    inputs = keras.Input(shape=(1,))
    outputs = keras.layers.Dense(1, activation="relu")(inputs)
    backend.reset_uids()  # Keras's name counters start again
    names = [keras.Model(inputs=inputs, outputs=outputs).name for _ in range(3)]
    assert names == ["model", "model_1", "model_2"]


class _UpdatesLayer(keras.layers.Layer):
    def build(self, input_shape):
        self.a = self.add_weight("a", (1, 1), "float32", trainable=False)
        self.b = self.add_weight("b", (1, 1), "float32", trainable=False)
        self.add_update(tf.compat.v1.assign_add(self.a, [[1.0]], name="unconditional_update"))
        self.built = True

    def call(self, inputs):
        self.add_update(tf.compat.v1.assign_add(self.b, inputs, name="conditional_update"))
        return inputs + 1


@pytest.mark.follows("test_get_updates")
def test_get_updates():
    # As the original: a v1 graph of its own, where updates are collected as ops.
    with tf.Graph().as_default():
        layer = _UpdatesLayer()
        layer(keras.Input(shape=(1,)))
        assert len(layer.updates) == 2
        x2 = keras.Input(shape=(1,))
        y2 = layer(x2)
        assert len(layer.updates) == 3
        network = keras.Model(x2, y2)
        assert len(network.updates) == 3
        layer(keras.Input(shape=(1,)))
        assert len(network.updates) == 4
        x4 = keras.Input(shape=(1,))
        network(x4)
        assert len(network.updates) == 5
        network.add_update(tf.compat.v1.assign_add(layer.a, [[1]]))
        assert len(network.updates) == 6
        network.add_update(tf.compat.v1.assign_add(layer.b, x4))
        assert len(network.updates) == 7


@pytest.mark.follows("test_get_updates_bn")
def test_get_updates_bn():
    with tf.Graph().as_default():
        layer = keras.layers.BatchNormalization()
        layer(keras.Input(shape=(1,)))
        assert len(layer.updates) == 2  # the moving mean and variance


@pytest.mark.follows("testTopologicalAttributes")
def test_topological_attributes():
    a = keras.Input(shape=(32,), name="input_a")
    b = keras.Input(shape=(32,), name="input_b")
    test_layer = keras.layers.Dense(16, name="test_layer")
    a_test = test_layer(a)
    assert test_layer.input is a
    assert test_layer.output is a_test
    assert test_layer.input_shape == (None, 32)
    assert test_layer.output_shape == (None, 16)
    dense = keras.layers.Dense(16, name="dense_1")
    a_2, b_2 = dense(a), dense(b)
    assert dense.get_input_at(0) is a
    assert dense.get_input_at(1) is b
    assert dense.get_output_at(0) is a_2
    assert dense.get_output_at(1) is b_2
    assert [dense.get_input_shape_at(i) for i in (0, 1)] == [(None, 32)] * 2
    assert [dense.get_output_shape_at(i) for i in (0, 1)] == [(None, 16)] * 2
    with pytest.raises(ValueError):
        dense.get_input_at(2)
    for attribute in ("input", "output", "output_shape", "input_shape"):
        with pytest.raises(AttributeError):
            getattr(keras.layers.Dense(16), attribute)
    # Called on inputs of different shapes: no single input shape.
    new_dense = keras.layers.Dense(16)
    new_dense(keras.Input(shape=(3, 32)))
    new_dense(keras.Input(shape=(5, 32)))
    with pytest.raises(AttributeError):
        _ = new_dense.input_shape


@pytest.mark.follows("testTopologicalAttributesMultiOutputLayer")
def test_topological_attributes_multi_output_layer():
    class PowersLayer(keras.layers.Layer):
        def call(self, inputs):
            return [inputs**2, inputs**3]

    x = keras.Input(shape=(32,))
    test_layer = PowersLayer()
    p1, p2 = test_layer(x)
    assert test_layer.input is x
    assert all(o is p for o, p in zip(test_layer.output, [p1, p2], strict=True))
    assert test_layer.input_shape == (None, 32)
    assert test_layer.output_shape == [(None, 32), (None, 32)]
    model = keras.Model(x, [p1, p2])
    values = np.arange(64, dtype=np.float32).reshape(2, 32) / 10
    squares, cubes = model.predict(values, batch_size=2, verbose=0)
    assert_close(squares, values**2, rtol=1e-5)
    assert_close(cubes, values**3, rtol=1e-5)


@pytest.mark.follows("testTopologicalAttributesMultiInputLayer")
def test_topological_attributes_multi_input_layer():
    class AddLayer(keras.layers.Layer):
        def call(self, inputs):
            assert len(inputs) == 2
            return inputs[0] + inputs[1]

    a, b = keras.Input(shape=(32,)), keras.Input(shape=(32,))
    test_layer = AddLayer()
    y = test_layer([a, b])
    assert all(i is t for i, t in zip(test_layer.input, [a, b], strict=True))
    assert test_layer.output is y
    assert test_layer.input_shape == [(None, 32), (None, 32)]
    assert test_layer.output_shape == (None, 32)
    model = keras.Model([a, b], y)
    x = np.ones((2, 32), np.float32)
    assert_close(model.predict([x, 2 * x], batch_size=2, verbose=0), 3 * x)


def _same_objects(a, b):
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


@pytest.mark.follows("testBasicNetwork")
def test_basic_network():
    x = keras.Input(shape=(32,))
    dense = keras.layers.Dense(2)
    network = keras.Model(x, dense(x), name="dense_network")
    assert network.name == "dense_network"
    assert len(network.layers) == 2  # InputLayer + Dense
    assert network.layers[1] is dense
    assert _same_objects(network.weights, dense.weights)
    assert _same_objects(network.trainable_weights, dense.trainable_weights)
    assert _same_objects(network.non_trainable_weights, dense.non_trainable_weights)
    assert network(keras.Input(shape=(32,))).shape.as_list() == [None, 2]
    values = np.ones((3, 32), np.float32)
    kernel, bias = dense.get_weights()
    assert_close(network(tf.constant(values)), values @ kernel + bias, rtol=1e-5)
    network.trainable = False
    assert _same_objects(network.weights, dense.weights)
    assert network.trainable_weights == []
    assert _same_objects(
        network.non_trainable_weights, dense.trainable_weights + dense.non_trainable_weights
    )


@pytest.mark.follows("test_layer_call_arguments")
def test_layer_call_arguments():
    inp = keras.Input(shape=(2,))
    x = keras.layers.Dense(3, kernel_initializer="ones")(inp)
    x = keras.layers.Dropout(0.999)(x, training=True)
    model = keras.Model(inp, x)
    values = np.ones((64, 2), np.float32)

    def dropped_fraction(m):
        return np.mean(m.predict(values, batch_size=64, verbose=0) == 0)

    # The training argument is kept: dropout applies in predict, also after from_config.
    assert dropped_fraction(model) > 0.9
    assert dropped_fraction(keras.Model.from_config(model.get_config())) > 0.9


@pytest.mark.follows("test_node_construction")
def test_node_construction():
    a = keras.Input(shape=(32,), name="input_a")
    b = keras.Input(shape=(32,), name="input_b")
    with pytest.raises(ValueError):
        keras.Input(shape=(32,), batch_shape=(10, 32))
    with pytest.raises(ValueError):
        keras.Input(shape=(32,), unknown_kwarg=None)
    assert a.shape.as_list() == [None, 32]
    a_layer, a_node_index, a_tensor_index = a._keras_history
    b_layer = b._keras_history[0]
    assert len(a_layer._inbound_nodes) == 1
    assert a_tensor_index == 0
    node = a_layer._inbound_nodes[a_node_index]
    assert node.outbound_layer == a_layer
    assert node.inbound_layers == []
    assert node.input_tensors == [a]
    assert node.input_shapes == [(None, 32)]
    assert node.output_shapes == [(None, 32)]
    dense = keras.layers.Dense(16, name="dense_1")
    dense(a)
    dense(b)
    assert len(dense._inbound_nodes) == 2
    assert len(dense._outbound_nodes) == 0
    assert dense._inbound_nodes[0].inbound_layers == a_layer
    assert dense._inbound_nodes[1].inbound_layers == b_layer
    assert dense._inbound_nodes[0].input_tensors is a
    assert dense._inbound_nodes[1].input_tensors is b
    assert dense.kernel.shape.as_list() == [32, 16]
    assert [dense.get_input_mask_at(i) for i in (0, 1)] == [None, None]
    assert [dense.get_output_mask_at(i) for i in (0, 1)] == [None, None]


def _merge_model():
    """The originals' two-input model: a shared Dense, concatenated, two more Denses."""
    a = keras.Input(shape=(32,), name="input_a")
    b = keras.Input(shape=(32,), name="input_b")
    dense = keras.layers.Dense(16, name="dense_1")
    merged = keras.layers.concatenate([dense(a), dense(b)], name="merge")
    c = keras.layers.Dense(64, name="dense_2")(merged)
    d = keras.layers.Dense(5, name="dense_3")(c)
    return keras.Model(inputs=[a, b], outputs=[c, d], name="model"), (a, b, c)


def _merge_model_numpy(model, x_a, x_b):
    """The merge model's outputs computed with numpy from its weights."""
    k1, b1 = model.get_layer("dense_1").get_weights()
    k2, b2 = model.get_layer("dense_2").get_weights()
    k3, b3 = model.get_layer("dense_3").get_weights()
    c = np.concatenate([x_a @ k1 + b1, x_b @ k1 + b1], axis=1) @ k2 + b2
    return c, c @ k3 + b3


def _random_inputs(count, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.random((10, 32), np.float32) for _ in range(count)]


@pytest.mark.follows("test_multi_input_layer")
def test_multi_input_layer():
    model, (a, b, c) = _merge_model()
    assert len(model.layers) == 6
    shapes = model.compute_output_shape([(None, 32), (None, 32)])
    assert [s.as_list() for s in shapes] == [[None, 64], [None, 5]]
    assert model.compute_mask([a, b], [None, None]) == [None, None]
    assert [layer.name for layer in model.layers][2:] == ["dense_1", "merge", "dense_2", "dense_3"]
    assert model.input_names == ["input_a", "input_b"]
    assert model.output_names == ["dense_2", "dense_3"]
    assert _same_objects(keras.utils.get_source_inputs(c), [a, b])
    x = _random_inputs(2)
    outputs = model.predict(x, batch_size=10, verbose=0)
    for out, ref in zip(outputs, _merge_model_numpy(model, *x), strict=True):
        assert_close(out, ref, rtol=1e-4, atol=1e-5)
    recreated = keras.models.model_from_json(model.to_json())
    recreated.compile("rmsprop", "mse")
    assert [layer.name for layer in recreated.layers][2:] == [
        "dense_1",
        "merge",
        "dense_2",
        "dense_3",
    ]
    assert recreated.output_names == ["dense_2", "dense_3"]
    recreated.set_weights(model.get_weights())
    for out, ref in zip(recreated.predict(x, batch_size=10, verbose=0), outputs, strict=True):
        assert_close(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.follows("test_recursion")
def test_recursion():
    model, (_, _, c) = _merge_model()
    e = keras.Input(shape=(32,), name="input_e")
    f = keras.Input(shape=(32,), name="input_f")
    g, h = model([e, f])
    assert len(model.inputs) == 2
    assert g.shape.as_list() == c.shape.as_list()
    assert h.shape.as_list() == [None, 5]
    dense_4 = keras.layers.Dense(7, name="dense_4")
    final_model = keras.Model(inputs=[e, f], outputs=[dense_4(h), g], name="final")
    assert len(final_model.inputs) == 2
    assert len(final_model.outputs) == 2
    assert [layer.name for layer in final_model.layers][2:] == ["model", "dense_4"]
    assert final_model.compute_output_shape([(10, 32), (10, 32)]) == [(10, 7), (10, 64)]
    x = _random_inputs(2)
    out_i, out_g = final_model.predict(x, batch_size=10, verbose=0)
    ref_g, ref_h = _merge_model_numpy(model, *x)
    k4, b4 = dense_4.get_weights()
    assert_close(out_g, ref_g, rtol=1e-4, atol=1e-5)
    assert_close(out_i, ref_h @ k4 + b4, rtol=1e-4, atol=1e-5)
    recreated = keras.Model.from_config(final_model.get_config())
    recreated.set_weights(final_model.get_weights())
    for out, ref in zip(
        recreated.predict(x, batch_size=10, verbose=0), [out_i, out_g], strict=True
    ):
        assert_close(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.follows("test_multi_input_multi_output_recursion")
def test_multi_input_multi_output_recursion():
    model, _ = _merge_model()
    j, k, o, p = (keras.Input(shape=(32,), name=f"input_{n}") for n in "jkop")
    _, n = model([j, k])
    q, _ = model([o, p])
    assert n.shape.as_list() == [None, 5]
    assert q.shape.as_list() == [None, 64]
    s = keras.layers.concatenate([n, q], name="merge_nq")
    assert s.shape.as_list() == [None, 64 + 5]
    x = _random_inputs(4)
    expected = np.concatenate(
        [_merge_model_numpy(model, x[0], x[1])[1], _merge_model_numpy(model, x[2], x[3])[0]],
        axis=1,
    )
    for outputs in ([s], s):  # a one-element list or the tensor
        multi_io_model = keras.Model([j, k, o, p], outputs)
        assert_close(
            multi_io_model.predict(x, batch_size=10, verbose=0), expected, rtol=1e-4, atol=1e-5
        )
    recreated = keras.Model.from_config(multi_io_model.get_config())
    recreated.set_weights(multi_io_model.get_weights())
    assert_close(recreated.predict(x, batch_size=10, verbose=0), expected, rtol=1e-4, atol=1e-5)
    keras.Model.from_config(model.get_config())
    keras.models.model_from_json(model.to_json())


@pytest.mark.follows("test_invalid_graphs")
def test_invalid_graphs():
    model, _ = _merge_model()

    def called():
        j = keras.Input(shape=(32,), name="input_j")
        k = keras.Input(shape=(32,), name="input_k")
        return j, k, *model([j, k])

    j, k, m, n = called()
    with pytest.raises(ValueError):  # a disconnected graph
        keras.Model([j], [m, n])
    j, k, m, n = called()
    assert len(keras.Model([j, k], [m, n, n]).outputs) == 3  # redundant outputs are allowed
    j, k, m, n = called()
    with pytest.raises(ValueError):  # redundant inputs
        keras.Model([j, k, j], [m, n])
    j, k, m, n = called()
    with pytest.raises((TypeError, ValueError)):  # garbage as an output
        keras.Model([j, k], [m, n, 0])


@pytest.mark.follows("test_invalid_graphs")
def test_invalid_graphs_input_not_an_input():
    # The original's test runs in graph mode (`combinations.combine(mode=['graph'])`),
    # where tf_keras, as the original's Keras, finds the graph disconnected; in TF2's
    # eager mode tf_keras rebuilds the model from the tensor, with a warning.
    with tf.Graph().as_default():
        model, _ = _merge_model()
        j = keras.layers.Dense(32)(keras.Input(shape=(32,), name="input_j"))
        k = keras.Input(shape=(32,), name="input_k")
        m, n = model([j, k])
        with pytest.raises(ValueError, match="Graph disconnected"):
            keras.Model([j, k], [m, n])


@pytest.mark.follows("test_raw_tf_compatibility")
def test_raw_tf_compatibility():
    # As the original: v1 placeholders, in a graph of its own.
    with tf.Graph().as_default():
        model, _ = _merge_model()
        j = keras.Input(shape=(32,), name="input_j")
        k = keras.Input(shape=(32,), name="input_k")
        m, n = model([j, k])
        assert len(model.inputs) == 2
        tf_model = keras.Model([j, k], [m, n])
        j_tf = tf.compat.v1.placeholder(dtype=tf.float32, shape=(None, 32))
        k_tf = tf.compat.v1.placeholder(dtype=tf.float32, shape=(None, 32))
        m_tf, n_tf = tf_model([j_tf, k_tf])
        assert m_tf.shape.as_list() == [None, 64]
        assert n_tf.shape.as_list() == [None, 5]
        assert keras.layers.concatenate([j_tf, k_tf], axis=1).shape.as_list() == [None, 64]
        assert keras.layers.add([j_tf, k_tf]).shape.as_list() == [None, 32]
        x = tf.compat.v1.placeholder(shape=(None, 2), dtype=tf.float32)
        keras.layers.InputLayer(input_tensor=x)
        out = keras.layers.Dense(2)(keras.Input(tensor=x))
        assert out.shape.as_list() == [None, 2]


@pytest.mark.follows("testMaskingSingleInput")
def test_masking_single_input():
    class MaskedLayer(keras.layers.Layer):
        def call(self, inputs, mask=None):
            if mask is not None:
                return inputs * mask
            return inputs

        def compute_mask(self, inputs, mask=None):
            return tf.ones_like(inputs)

    a = tf.constant([2] * 32)
    mask = tf.constant([0, 1] * 16)
    b = MaskedLayer()(a, mask=mask)
    np.testing.assert_array_equal(b._keras_mask, np.ones(32))
    np.testing.assert_array_equal(b, (a * mask).numpy())


class _MaybeAdd(keras.layers.Layer):
    def call(self, x1, x2=None):
        if x2 is not None:
            return x1 + x2
        return x1


class _IdentityLayer(keras.layers.Layer):
    def call(self, x):
        return x


def _fit_loss(model, x, y):
    """The first-epoch loss of `model` and of its copy from its config (as the originals)."""
    losses = []
    custom_objects = {"_MaybeAdd": _MaybeAdd, "_IdentityLayer": _IdentityLayer}
    for m in (model, keras.Model.from_config(model.get_config(), custom_objects=custom_objects)):
        m.compile("sgd", "mse")
        losses.append(m.fit(x=x, y=y, batch_size=2, verbose=0).history["loss"][0])
    return losses


@pytest.mark.follows("test_call_kwarg_derived_from_keras_layer")
@pytest.mark.parametrize("share_already_used_layer", [True, False])
def test_call_kwarg_derived_from_keras_layer(share_already_used_layer):
    input1, input2 = keras.Input(10), keras.Input(10)
    identity_layer = _IdentityLayer()
    if share_already_used_layer:
        keras.Model([input1], identity_layer(input1))
    outputs = _MaybeAdd()(input1, x2=identity_layer(input2))
    model = keras.Model([input1, input2], outputs)
    x = [3 * np.ones((10, 10)), 7 * np.ones((10, 10))]
    assert _fit_loss(model, x, 10 * np.ones((10, 10))) == [0.0, 0.0]  # 3 + 7 is the target


@pytest.mark.follows("test_call_kwarg_dtype_serialization")
def test_call_kwarg_dtype_serialization():
    class Double(keras.layers.Layer):
        def call(self, x1, dtype=None):
            return tf.cast(x1 + x1, dtype=dtype)

    input1 = keras.Input(10)
    model = keras.Model([input1], Double()(input1, dtype=tf.float16))
    for m in (
        model,
        keras.Model.from_config(model.get_config(), custom_objects={"Double": Double}),
    ):
        m.compile("sgd", "mse")
        history = m.fit(x=[3 * np.ones((10, 10))], y=6 * np.ones((10, 10)), batch_size=2, verbose=0)
        assert history.history["loss"][0] == 0.0
        assert m(tf.ones((3, 10))).dtype == tf.float16


@pytest.mark.follows("test_call_kwarg_nonserializable")
def test_call_kwarg_nonserializable():
    class Double(keras.layers.Layer):
        def call(self, x1, kwarg=None):
            del kwarg
            return x1 + x1

    class NonSerializable:
        def __init__(self, foo=None):
            self.foo = foo

    input1 = keras.Input(10)
    model = keras.Model([input1], Double(name="double")(input1, kwarg=NonSerializable()))
    model.compile("sgd", "mse")
    history = model.fit(x=[3 * np.ones((10, 10))], y=6 * np.ones((10, 10)), batch_size=2, verbose=0)
    assert history.history["loss"][0] == 0.0
    with pytest.raises(TypeError, match="Layer double was passed non-JSON-serializable arguments."):
        model.get_config()


@pytest.mark.follows("test_call_kwarg_derived_from_keras_layer_and_first_arg_is_constant")
@pytest.mark.parametrize("share_already_used_layer", [True, False])
def test_call_kwarg_derived_from_keras_layer_and_first_arg_is_constant(share_already_used_layer):
    input2 = keras.Input(10)
    identity_layer = _IdentityLayer()
    if share_already_used_layer:
        keras.Model([input2], identity_layer(input2))
    model = keras.Model([input2], _MaybeAdd()(3.0, x2=identity_layer(input2)))
    assert _fit_loss(model, 7 * np.ones((10, 10)), 10 * np.ones((10, 10))) == [0.0, 0.0]


@pytest.mark.follows("test_call_nested_arg_derived_from_keras_layer")
def test_call_nested_arg_derived_from_keras_layer():
    class AddAll(keras.layers.Layer):
        def call(self, x1, x2, x3=None):
            out = x1 + x2
            if x3 is not None:
                for t in x3.values():
                    out += t
            return out

    input1, input2, input3 = keras.Input(10), keras.Input(10), keras.Input(10)
    outputs = AddAll()(
        input1, 4 * tf.ones((1, 10)), x3={"a": input2, "b": input3, "c": 5 * tf.ones((1, 10))}
    )
    model = keras.Model([input1, input2, input3], outputs)
    x = [np.ones((10, 10)), 2 * np.ones((10, 10)), 3 * np.ones((10, 10))]
    for m in (
        model,
        keras.Model.from_config(model.get_config(), custom_objects={"AddAll": AddAll}),
    ):
        m.compile("sgd", "mse")
        history = m.fit(x=x, y=15 * np.ones((10, 10)), batch_size=2, verbose=0)
        assert history.history["loss"][0] == 0.0  # 1 + 4 + 2 + 3 + 5


@pytest.mark.follows("test_dependency_tracking")
@pytest.mark.parametrize("model_type", ["sequential", "functional", "subclass"])
def test_dependency_tracking(model_type):
    model = small_mlp(1, 4, 3, model_type)
    model.trackable = tf.train.Checkpoint()
    assert "trackable" in model._unconditional_dependency_names
    assert model.trackable is model._lookup_dependency("trackable")


@pytest.mark.follows("test_external_keras_serialization_compat_input_layers")
def test_external_keras_serialization_compat_input_layers():
    inputs = keras.Input(shape=(10,))
    config = keras.Model(inputs, keras.layers.Dense(1)(inputs)).get_config()
    # Single inputs and outputs are saved as 1-element lists.
    assert len(config["input_layers"]) == 1
    assert len(config["output_layers"]) == 1


@pytest.mark.follows("test_external_keras_serialization_compat_inbound_nodes")
def test_external_keras_serialization_compat_inbound_nodes():
    inputs = keras.Input(shape=(10,), name="in")
    config = keras.Model(inputs, keras.layers.Dense(1)(inputs)).get_config()
    assert config["layers"][1]["inbound_nodes"] == [[["in", 0, 0, {}]]]
    inputs1 = keras.Input(shape=(10,), name="in1")
    inputs2 = keras.Input(shape=(10,), name="in2")
    model = keras.Model([inputs1, inputs2], keras.layers.Add()([inputs1, inputs2]))
    assert model.get_config()["layers"][2]["inbound_nodes"] == [
        [["in1", 0, 0, {}], ["in2", 0, 0, {}]]
    ]


@pytest.mark.follows("test_updates_with_direct_call")
def test_updates_with_direct_call():
    # As the original: a v1 graph of its own, where updates are collected as ops.
    with tf.Graph().as_default():
        inputs = keras.Input(shape=(10,))
        x = keras.layers.Dense(10)(keras.layers.BatchNormalization()(inputs))
        model = keras.Model(inputs, x)
        model(backend.placeholder(shape=(10, 10)))
        assert len(model.updates) == 4  # moving mean and variance, for each of two calls


@pytest.mark.follows("test_graph_network_dtype")
def test_graph_network_dtype():
    inputs = keras.Input((10,))
    network = keras.Model(inputs, keras.layers.Dense(10)(inputs))
    assert network.dtype == "float32"


@pytest.mark.follows("test_subclassed_network_dtype")
def test_subclassed_network_dtype():
    class IdentityNetwork(keras.Model):
        def call(self, inputs):
            return inputs

    for kwargs, dtype, output_dtype in [
        ({}, "float32", "float32"),
        ({"dtype": "float16"}, "float16", "float16"),
        ({"autocast": False}, "float32", "float64"),
    ]:
        network = IdentityNetwork(**kwargs)
        assert network.dtype == dtype
        assert network(tf.constant(1, "float64")).dtype == output_dtype


@pytest.mark.follows("test_compute_output_shape_cache")
def test_compute_output_shape_cache():
    x = keras.Input(shape=(None, 32))
    network = keras.Model(x, keras.layers.Dense(2)(x), name="dense_network")
    for i in range(999, 1024):
        assert network.compute_output_shape((1, i, 32)) == (1, i, 2)
