"""Conformance: graphcore/keras `keras/ipu/extensions/extensions_test.py`.

Models created in an IPUStrategy scope are instances of the extension class of their
kind (Sequential, functional, subclassed); model classes that override Keras's
`make_*_function`, `train_step` (and, pipelined, `test_step`/`predict_step`/`call`) or
lack `call` fail in fit/evaluate/predict with the original's RuntimeError; a pipelined
model given fewer inputs than it takes fails with Keras's input-count error; layer
methods decorated with `base_layer.extension_delegate` call the extension that
`IPUStrategy._register_keras_extension` mixed into the layer.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu
from tf_keras import layers
from tf_keras.ipu import extensions
from tf_keras.src.engine import base_layer, functional, sequential


@pytest.fixture
def strategy(strategy_on):
    return strategy_on(1)


@pytest.mark.follows("testExtension")
def test_extension(strategy):
    class TestLayer(base_layer.Layer):
        @base_layer.extension_delegate
        def call(self, x, training=False):
            return x + 1.0

    class SquareExtension(base_layer.KerasExtension):
        def _call_supported(self, *args, **kwargs):
            return True

        def _call_delegate(self, x, training=False):
            return x * x

    strategy._register_keras_extension(TestLayer, base_layer.KerasExtension, SquareExtension)
    with strategy.scope():
        result = strategy.run(
            tf.function(lambda layer: layer(10.0), jit_compile=True), args=[TestLayer()]
        )
    np.testing.assert_allclose(result, 100.0)


@pytest.mark.follows("testExtensionWithClassMethod")
def test_extension_with_class_method(strategy):
    class TestLayer(base_layer.Layer):
        @classmethod
        @base_layer.extension_delegate
        def my_classmethod(cls, x, **kwargs):
            return x * 123

    class TestExtension(base_layer.KerasExtension):
        @classmethod
        def _my_classmethod_supported(cls, *args, **kwargs):
            return True

        @classmethod
        def _my_classmethod_delegate(cls, x, **kwargs):
            return x * cls.my_classmethod(x, __extension_delegate=False)

    strategy._register_keras_extension(TestLayer, base_layer.KerasExtension, TestExtension)
    with strategy.scope():
        assert TestLayer.my_classmethod(2) == 492
    assert TestLayer.my_classmethod(1) == 123


@pytest.mark.follows("testKerasModelExtensions")
def test_keras_model_extensions(strategy):
    sequential_extension = extensions.sequential_extensions.SequentialExtension
    functional_extension = extensions.functional_extensions.FunctionalExtension
    with strategy.scope():
        model = sequential.Sequential()
        assert isinstance(model, sequential_extension)
        assert not isinstance(model, functional_extension)

        class MySequential(sequential.Sequential):
            pass

        model = MySequential()
        assert isinstance(model, sequential_extension)
        assert not isinstance(model, functional_extension)

        inp = layers.Input(shape=[])
        model = keras.Model(inp, inp + inp)
        assert isinstance(model, functional_extension)

        class MyModel(keras.Model):
            pass

        inputs = layers.Input(shape=(1,))
        model = MyModel(inputs, layers.Dense(1)(inputs))
        assert isinstance(model, functional_extension)
        assert isinstance(model, MyModel)
    # Outside the scope, models are stock Keras models.
    assert not isinstance(sequential.Sequential(), sequential_extension)


def _overriding(base, names):
    """A subclass of `base` overriding `names` by calling through to the base class."""

    def through(name):
        def method(self, *args, **kwargs):
            return getattr(super(cls, self), name)(*args, **kwargs)

        return method

    cls = type("Overriding", (base,), {name: through(name) for name in names})
    return cls


MAKE_FUNCTIONS = ("make_train_function", "make_test_function", "make_predict_function")
STEP_FUNCTIONS = ("train_step", "test_step", "predict_step")


def _expect_each_method_fails(model, names, x, y):
    fit, evaluate, predict = names
    with pytest.raises(RuntimeError, match=f"The function `{fit}`"):
        model.fit(x, y, batch_size=1, verbose=0)
    with pytest.raises(RuntimeError, match=f"The function `{evaluate}`"):
        model.evaluate(x, y, batch_size=1, verbose=0)
    with pytest.raises(RuntimeError, match=f"The function `{predict}`"):
        model.predict(x, batch_size=1, verbose=0)


def _pipeline_on_one_stage(model):
    if isinstance(model, sequential.Sequential):
        model.set_pipeline_stage_assignment([0])
    else:
        assignments = model.get_pipeline_stage_assignment()
        for assignment in assignments:
            assignment.pipeline_stage = 0
        model.set_pipeline_stage_assignment(assignments)
    model.set_pipelining_options(gradient_accumulation_steps_per_replica=1)


def _check_overrides(make_model):
    x, y = np.ones((1, 1), np.float32), np.ones((1, 1), np.float32)
    model = make_model(MAKE_FUNCTIONS)
    model.compile(loss="mse")
    _expect_each_method_fails(model, MAKE_FUNCTIONS, x, y)

    model = make_model(STEP_FUNCTIONS)
    model.compile(loss="mse")
    _pipeline_on_one_stage(model)
    _expect_each_method_fails(model, STEP_FUNCTIONS, x, y)
    model.reset_pipeline_stage_assignment()
    model.compile(steps_per_execution=2)
    model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=2)
    with pytest.raises(RuntimeError, match="The function `train_step`"):
        model.fit(np.ones((2, 1)), np.ones((2, 1)), batch_size=1, verbose=0)

    model = make_model(("call",))
    model.compile(loss="mse")
    _pipeline_on_one_stage(model)
    _expect_each_method_fails(model, ("call",) * 3, x, y)


@pytest.mark.follows("testModelOverrides")
def test_model_overrides(strategy):
    def make(names):
        inputs = layers.Input(shape=(1,))
        return _overriding(functional.Functional, names)(inputs, layers.Dense(1)(inputs))

    with strategy.scope():
        _check_overrides(make)


@pytest.mark.follows("testSequential")
def test_sequential(strategy):
    def make(names):
        return _overriding(sequential.Sequential, names)([layers.Dense(1, input_shape=(1,))])

    with strategy.scope():
        _check_overrides(make)


@pytest.mark.follows("testModel")
def test_model(strategy):
    class MakeFunctionsOverrideModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = layers.Dense(1)

        def call(self, inputs):
            return self.dense(inputs)

    for name in MAKE_FUNCTIONS:
        setattr(
            MakeFunctionsOverrideModel,
            name,
            lambda self, *a, _name=name, **k: getattr(keras.Model, _name)(self, *a, **k),
        )

    class CallNotImplementedModel(keras.Model):
        pass

    x, y = np.ones((1, 1), np.float32), np.ones((1, 1), np.float32)
    with strategy.scope():
        model = MakeFunctionsOverrideModel()
        model.compile(loss="mse")
        _expect_each_method_fails(model, MAKE_FUNCTIONS, x, y)

        model = CallNotImplementedModel()
        model.compile(loss="mse")
        _expect_each_method_fails(model, ("call",) * 3, x, y)


@pytest.mark.follows("testInputValidation")
def test_input_validation(strategy_on):
    class TwoInTwoOutIdentity(layers.Layer):
        def call(self, x, y):
            return x, y

    strategy = strategy_on(2)
    with strategy.scope():
        input_x = layers.Input(shape=(80), dtype=np.int32, batch_size=32)
        input_y = layers.Input(shape=(1,), dtype=np.int32, batch_size=32)
        with extensions.PipelineStage(0):
            x = layers.Dense(10)(input_x)
        with extensions.PipelineStage(1):
            x = layers.Dense(1)(x)
            x = TwoInTwoOutIdentity()(x, input_y)[0]
        model = keras.Model(inputs=[input_x, input_y], outputs=x)
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=8, device_mapping=[0, 1]
        )
        model.compile(
            loss="binary_crossentropy",
            optimizer=keras.optimizers.Adam(0.005),
            steps_per_execution=16,
        )
        # One input per sample where the model takes two (the original used IMDB reviews).
        x = np.random.default_rng(0).integers(0, 2000, size=(64, 80)).astype(np.int32)
        y = np.ones((64,), np.int32)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32, drop_remainder=True)
        with pytest.raises(
            ValueError,
            match=r"Layer \w+ expects 2 input\(s\), but it received 1 input tensors\. Inputs received: .*",
        ):
            model.fit(dataset, steps_per_epoch=768, epochs=3, verbose=0)


assert ipu  # configures the emulated IPUs before TensorFlow starts
