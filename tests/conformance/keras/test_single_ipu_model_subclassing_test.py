"""Conformance: graphcore/keras `keras/ipu/extensions/single_ipu/model_subclassing_test.py`.

Subclassed Keras models inside an IPUStrategy: built by `build` (with a dtype, shapes of
several kinds, several inputs) or by their first call, a user's `build`, fit on arrays
and on a dataset of dicts (against stock Keras), weights saved and loaded, summaries,
tracked variables and weights, and the stock errors (read-only attribute, input shape
of the wrong type, extra positional arguments of `call`).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from single_ipu_checks import assert_close, stock

pytestmark = pytest.mark.usefixtures("ipu_scope")


class SmallSubclassMLP(keras.Model):
    """Keras's `testing_utils.SmallSubclassMLP` with dropout and batch normalization."""

    def __init__(self, num_hidden, num_classes):
        super().__init__(name="test_model")
        self.layer_a = keras.layers.Dense(num_hidden, activation="relu")
        self.layer_b = keras.layers.Dense(num_classes, activation="softmax")
        self.dp = keras.layers.Dropout(0.5)
        self.bn = keras.layers.BatchNormalization(axis=-1)

    def call(self, inputs):
        return self.layer_b(self.bn(self.dp(self.layer_a(inputs))))


class SimpleConvTestModel(keras.Model):
    def __init__(self, num_classes=10):
        super().__init__(name="test_model")
        self.conv1 = keras.layers.Conv2D(4, (3, 3), activation="relu")
        self.flatten = keras.layers.Flatten()
        self.dense1 = keras.layers.Dense(num_classes, activation="softmax")

    def call(self, x):
        return self.dense1(self.flatten(self.conv1(x)))


class MultiIOModel(keras.Model):
    """Keras's `get_multi_io_subclass_model`: a shared branch, two heads."""

    def __init__(self, num_classes=(2, 3)):
        super().__init__(name="test_model")
        self.shared = keras.layers.Dense(32, activation="relu")
        self.branch_a = keras.layers.Dense(num_classes[0], activation="softmax")
        self.branch_b = keras.layers.Dense(num_classes[1], activation="softmax")
        self.dp = keras.layers.Dropout(0.5)
        self.bn = keras.layers.BatchNormalization()

    def call(self, inputs):
        a, b = inputs
        return self.branch_a(self.bn(self.dp(self.shared(a)))), self.branch_b(self.shared(b))


def _check_unbuilt(model):
    assert not model.built
    assert not model.weights


def _check_built(model):
    assert model.weights
    assert model.built


@pytest.mark.follows("test_build_with_dtype")
def test_build_with_dtype():
    class TypeCheckLayer(keras.layers.Layer):
        def call(self, x):
            if not hasattr(self, "x_dtype"):
                self.x_dtype = x.dtype
            elif x.dtype != self.x_dtype:
                raise TypeError(f"The dtype of `x` ({x.dtype.name}) does not match")
            return x

    class TestModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.layer = TypeCheckLayer()

        def call(self, inputs):
            return self.layer(inputs)

    x = np.ones([1, 32], np.int32)
    model = TestModel()
    model.build([1, 32])  # built for floats
    with pytest.raises(TypeError, match="The dtype of `x`"):
        model.predict(x, batch_size=1, verbose=0)
    model = TestModel()
    # The original builds with `build(keras.Input(...))`, which stock tf_keras 2.21 refuses
    # (an input shape must be a tuple or list): a call on a symbolic input of the dtype.
    model(keras.Input(shape=[32], dtype=np.int32))
    assert_close(model.predict(x, batch_size=1, verbose=0), x)


@pytest.mark.follows("test_custom_build")
def test_custom_build():
    class DummyModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense1 = keras.layers.Dense(32, activation="relu")
            self.uses_custom_build = False

        def call(self, inputs):
            return self.dense1(inputs)

        def build(self, input_shape):
            self.uses_custom_build = True

    model = DummyModel()
    model(tf.ones((32, 50)))
    assert model.uses_custom_build


@pytest.mark.follows("test_attribute_conflict_error")
def test_attribute_conflict_error():
    class ModelWithProperty(keras.Model):
        @property
        def read_only(self):
            return 1.0

    with pytest.raises(AttributeError, match="read_only"):
        ModelWithProperty().read_only = 2.0


@pytest.mark.follows("test_custom_build_with_fit")
def test_custom_build_with_fit():
    class DummyModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.layer1 = keras.layers.Dense(10, activation="relu")

        def build(self, input_shape):
            self.layer2 = keras.layers.Dense(1, activation="relu")

        def call(self, inputs):
            return self.layer2(self.layer1(inputs))

    model = DummyModel()
    model.compile("sgd", "mse")
    model.fit(np.ones((10, 10)), np.ones((10, 1)), batch_size=2, epochs=2, verbose=0)
    assert len(model.layers) == 2
    assert len(model.trainable_variables) == 4


@pytest.mark.follows("test_dataset_dict_with_fit")
def test_dataset_dict_with_fit():
    class MyModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense1 = keras.layers.Dense(1, kernel_initializer="ones")
            self.dense2 = keras.layers.Dense(1, kernel_initializer="zeros")
            self.add = keras.layers.Add()

        def call(self, x):
            return self.add([self.dense1(x["a"]), self.dense2(x["b"])])

    def run():
        model = MyModel()
        model.compile("sgd", "mse")
        data = tf.data.Dataset.from_tensor_slices(
            ({"a": np.ones((32, 10)), "b": np.ones((32, 20))}, np.ones((32, 1)))
        ).batch(2, drop_remainder=True)
        return model.fit(data, epochs=2, verbose=0).history["loss"]

    assert_close(run(), stock(run), rtol=1e-5)


@pytest.mark.follows("test_invalid_input_shape_build")
def test_invalid_input_shape_build():
    model = SmallSubclassMLP(32, 2)
    _check_unbuilt(model)
    with pytest.raises(ValueError, match="input shape is not one of the valid types"):
        model.build(input_shape=tf.compat.v1.Dimension(50))


@pytest.mark.follows("test_single_time_step_rnn_build")
def test_single_time_step_rnn_build():
    class SimpleRNNModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.lstm = keras.layers.LSTM(3)

        def call(self, inputs):
            return self.lstm(inputs)

    model = SimpleRNNModel()
    _check_unbuilt(model)
    model.build((None, 1, 4))
    _check_built(model)
    assert model(tf.ones((32, 1, 4))).shape == (32, 3)


@pytest.mark.follows("test_single_io_subclass_build")
def test_single_io_subclass_build():
    model = SmallSubclassMLP(32, 2)
    _check_unbuilt(model)
    model.build(input_shape=(None, 50))
    _check_built(model)
    assert model(tf.ones((32, 50))).shape == (32, 2)


@pytest.mark.follows("test_single_io_dimension_subclass_build")
def test_single_io_dimension_subclass_build():
    model = SmallSubclassMLP(32, 2)
    _check_unbuilt(model)
    model.build(input_shape=(tf.compat.v1.Dimension(None), tf.compat.v1.Dimension(50)))
    _check_built(model)
    assert model(tf.ones((32, 50))).shape == (32, 2)


@pytest.mark.follows("test_multidim_io_subclass_build")
def test_multidim_io_subclass_build():
    model = SimpleConvTestModel(10)
    _check_unbuilt(model)
    model.build(input_shape=(4, 8, 8, 3))
    _check_built(model)
    assert model(tf.ones((4, 8, 8, 3))).shape == (4, 10)


@pytest.mark.follows("test_tensorshape_io_subclass_build")
def test_tensorshape_io_subclass_build():
    model = SimpleConvTestModel(10)
    _check_unbuilt(model)
    model.build(input_shape=tf.TensorShape((None, 8, 8, 3)))
    _check_built(model)
    assert model(tf.ones((4, 8, 8, 3))).shape == (4, 10)


@pytest.mark.follows("test_subclass_save_model")
def test_subclass_save_model(tmp_path):
    model = SimpleConvTestModel(10)
    model.build(input_shape=tf.TensorShape((None, 8, 8, 3)))
    weights = model.get_weights()
    model.save_weights(str(tmp_path / "ckpt"))
    model.save_weights(str(tmp_path / "weights.h5"))
    for path in ("weights.h5", "ckpt"):
        loaded = SimpleConvTestModel(10)
        loaded.build(input_shape=tf.TensorShape((None, 8, 8, 3)))
        loaded.load_weights(str(tmp_path / path))
        for ours, saved in zip(loaded.get_weights(), weights, strict=True):
            assert_close(ours, saved)


@pytest.mark.follows("test_multi_io_subclass_build")
def test_multi_io_subclass_build():
    model = MultiIOModel()
    _check_unbuilt(model)
    shape = tf.TensorShape((None, 50))
    model.build(input_shape=[shape, shape])
    _check_built(model)
    outputs = model([tf.ones((10, 50)), tf.ones((10, 50))])
    assert [o.shape for o in outputs] == [(10, 2), (10, 3)]


@pytest.mark.follows("test_summary")
def test_summary():
    lines = []
    model = SmallSubclassMLP(32, 4)
    model(np.ones((3, 4)))
    model.summary(print_fn=lines.append)
    # 4*32+32 (dense), 2*32 (batch normalization's gamma and beta), 32*4+4 (dense).
    assert "Trainable params: 356" in "\n".join(lines)

    lines = []
    model = MultiIOModel(num_classes=(5, 6))
    model([np.ones((3, 4)), np.ones((3, 4))])
    model.summary(print_fn=lines.append)
    assert "Trainable params: 587" in "\n".join(lines)

    lines = []
    model = SmallSubclassMLP(32, 4)
    model.unused_layer = keras.layers.Dense(10)
    model(np.ones((3, 4)))
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "Trainable params: 356" in text
    assert "0 (unused)" in text


@pytest.mark.follows("test_extra_variable")
def test_extra_variable():
    class ExtraVar(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)
            self.var = tf.Variable(1.0)
            self.not_trainable_var = tf.Variable(2.0, trainable=False)

        def call(self, inputs):
            return self.dense(inputs + self.var)

    m = ExtraVar()
    assert m.trainable
    assert m.layers == [m.dense]
    assert m.variables == [m.var, m.not_trainable_var]
    assert m.trainable_variables == [m.var]
    assert len(m.get_weights()) == 2
    m.trainable = False
    assert m.trainable_variables == []
    assert m.non_trainable_variables == [m.var, m.not_trainable_var]
    m.trainable = True
    m(tf.ones([1, 1]))
    assert len(m.get_weights()) == 4
    assert m.variables == [m.dense.kernel, m.dense.bias, m.var, m.not_trainable_var]
    assert m.trainable_variables == [m.dense.kernel, m.dense.bias, m.var]
    m.dense.trainable = False
    assert m.trainable_variables == [m.var]
    assert m.non_trainable_variables == [m.dense.kernel, m.dense.bias, m.not_trainable_var]


@pytest.mark.follows("test_add_weight_in_model")
@pytest.mark.parametrize("in_build", [False, True])
def test_add_weight_in_model(in_build):
    class MyModel(keras.Model):
        def __init__(self):
            super().__init__()
            if not in_build:
                self._add_weights()

        def _add_weights(self):
            self.b = self.add_weight("bias", (10,))
            self.c = self.add_weight("bias2", (10,), trainable=False)

        def build(self, input_shape):
            if in_build:
                self._add_weights()

        def call(self, inputs):
            return inputs + self.b + self.c

    model = MyModel()
    model(tf.ones((10, 10)))
    assert len(model.trainable_weights) == 1
    assert len(model.non_trainable_weights) == 1
    assert len(model.weights) == 2


@pytest.mark.follows("test_positional_arg_in_call")
def test_positional_arg_in_call():
    class ModelWithPositionalArgs(keras.Model):
        def call(self, x, x2, x3=None):
            return x + x2

    x, y = np.ones((10, 1)), np.ones((10, 1))
    m = ModelWithPositionalArgs()
    m.compile("sgd", "mse")
    for method, args in [
        ("fit", (x, y)),
        ("evaluate", (x, y)),
        ("predict", (x,)),
        ("train_on_batch", (x, y)),
        ("test_on_batch", (x, y)),
        ("predict_on_batch", (x,)),
    ]:
        kwargs = {"batch_size": 2, "verbose": 0} if "batch" not in method else {}
        with pytest.raises(ValueError, match=f"Models passed to `{method}`"):
            getattr(m, method)(*args, **kwargs)


@pytest.mark.follows("test_no_dependency")
def test_no_dependency():
    from tensorflow.python.trackable.data_structures import NoDependency

    class Foo(keras.Model):
        def __init__(self):
            super().__init__()
            self.isdep = keras.layers.Dense(1)
            self.notdep = NoDependency(keras.layers.Dense(2))
            self.notdep_var = NoDependency(tf.Variable(1.0, name="notdep_var"))

    m = Foo()
    assert m.layers == [m.isdep, m.notdep]
    assert m.notdep_var.name == "notdep_var:0"


@pytest.mark.follows("test_add_update_in_model")
def test_add_update_in_model():
    class MyModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.b = self.add_weight("bias", (10,), initializer="ones")
            self.c = self.add_weight("bias2", (10,), initializer="zeros")

        def call(self, inputs):
            self.add_update(self.b.assign(self.b * 2))
            self.add_update(self.c.assign(inputs[1, :]))
            return inputs + self.b + self.c

    x = tf.convert_to_tensor(np.arange(100, dtype="float32").reshape(10, 10))
    model = MyModel()
    model(x)
    assert len(model.updates) == 0  # eager: updates run at once, none kept
    assert_close(model.b.numpy(), np.full(10, 2.0))
    assert_close(model.c.numpy(), x.numpy()[1])


class CustomCallModel(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense1 = keras.layers.Dense(1, activation="relu")
        self.dense2 = keras.layers.Dense(1, activation="softmax")

    def call(self, first, second, fiddle_with_output="no", training=True):
        combined = self.dense1(first) + self.dense2(second)
        return 10.0 * combined if fiddle_with_output == "yes" else combined


@pytest.mark.follows("test_no_inputs_in_signature")
def test_no_inputs_in_signature():
    model = CustomCallModel()
    first, second = tf.ones([2, 3]), tf.ones([2, 5])
    output = model(first, second)
    expected = model.dense1(first) + model.dense2(second)
    assert_close(output, expected)
    assert_close(model(first, second, fiddle_with_output="yes"), 10.0 * expected)
    assert_close(model(first, second=second, training=False), expected)


@pytest.mark.follows("test_training_args_call_build")
@pytest.mark.follows("test_training_and_mask_args_call_build")
@pytest.mark.parametrize("with_mask", [False, True])
def test_training_args_call_build(with_mask):
    class TrainingNoDefaultModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense1 = keras.layers.Dense(1)

        def call(self, x, training):
            return self.dense1(x)

    class TrainingMaskingModel(TrainingNoDefaultModel):
        def call(self, x, training=False, mask=None):
            return self.dense1(x)

    model = TrainingMaskingModel() if with_mask else TrainingNoDefaultModel()
    _check_unbuilt(model)
    model.build((None, 2))
    _check_built(model)


@pytest.mark.follows("test_custom_call_kwargs_and_build")
def test_custom_call_kwargs_and_build():
    model = CustomCallModel()
    _check_unbuilt(model)
    with pytest.raises(ValueError, match="cannot build your model if it has positional"):
        model.build(input_shape=[(2, 3), (2, 5)])


@pytest.mark.follows("test_kwargs_in_signature")
def test_kwargs_in_signature():
    class HasKwargs(keras.Model):
        def call(self, x, y=3, **kwargs):
            return x

    model = HasKwargs()
    assert_close(model(tf.ones([1]), a=3), [1.0])


@pytest.mark.follows("test_embed_dtype_with_subclass_build")
def test_embed_dtype_with_subclass_build():
    class Embedding(keras.layers.Layer):
        def __init__(self, vocab_size, embedding_dim, **kwargs):
            super().__init__(**kwargs)
            self.vocab_size = vocab_size
            self.embedding_dim = embedding_dim

        def build(self, _):
            self.embedding = self.add_weight(
                "embedding_kernel",
                shape=[self.vocab_size, self.embedding_dim],
                dtype=np.float32,
                initializer=tf.compat.v1.random_uniform_initializer(-0.1, 0.1),
                trainable=True,
            )

        def call(self, x):
            return tf.compat.v1.nn.embedding_lookup(self.embedding, x)

    class EmbedModel(keras.Model):
        def __init__(self, vocab_size, embed_size):
            super().__init__()
            self.embed1 = Embedding(vocab_size, embed_size)

        def call(self, inputs):
            return self.embed1(inputs)

    model = EmbedModel(100, 20)
    _check_unbuilt(model)
    with pytest.raises(ValueError, match="if your layers do not support float type inputs"):
        model.build(input_shape=(35, 20))


@pytest.mark.follows("test_training_no_default")
def test_training_no_default():
    class TrainingNoDefaultModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense1 = keras.layers.Dense(1, kernel_initializer="ones")

        def call(self, x, training):
            return self.dense1(x)

    assert_close(TrainingNoDefaultModel()(tf.ones([1, 1]), True), [[1.0]])
