"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/ipu_strategy_test.py`.

IPUStrategy scenarios: variables on the strategy's device, Keras models built and run
in its scope, training steps, `fit` with validation, data types, function kinds, outfeeds
dequeued while a program runs, dataset iterators. The original also counts engine
executions in Poplar's execution profile; those counts await the cost model.

The MNIST scenarios read `mnist.load_data()`, which needs a download; here they run on
deterministic data of MNIST's shapes and types (28x28x1 floats in [0, 1], a fifth of them
lit, one-hot labels
of 10 classes) whose labels a linear model can learn, which keeps the scenario's
expectation (the loss falls each epoch) meaningful.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

keras = tf.keras


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategyV1()


def _mnist_like(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    # About a fifth of the pixels lit, as in MNIST (stock Keras: the loss falls each epoch).
    x = (rng.random((n, 28, 28, 1)) * (rng.random((n, 28, 28, 1)) < 0.2)).astype(np.float32)
    projection = np.random.default_rng(1234).standard_normal((28 * 28, 10)).astype(np.float32)
    labels = np.argmax(x.reshape(n, -1) @ projection, axis=1)
    return x, keras.utils.to_categorical(labels, 10)


@pytest.mark.follows("test_create_variable")
@pytest.mark.xfail(
    strict=True,
    reason="difference: variables in IPUStrategy scopes are placed on the host device standing "
    "for the IPU (/device:CPU:N); the original names /device:IPU:N",
)
def test_create_variable():
    with ipu.ipu_strategy.IPUStrategyV1().scope():
        v0 = tf.Variable(1.0)
    assert v0.device == "/job:localhost/replica:0/task:0/device:IPU:0"
    with ipu.ipu_strategy.IPUStrategyV1("/device:IPU:1").scope():
        v1 = tf.Variable(1.0)
    assert v1.device == "/job:localhost/replica:0/task:0/device:IPU:1"


@pytest.mark.follows("test_create_variable")
def test_create_variable_on_the_strategys_ipu():
    """The part that holds here: each strategy places its variables on its own IPU."""
    with ipu.ipu_strategy.IPUStrategyV1().scope():
        v0 = tf.Variable(1.0)
    with ipu.ipu_strategy.IPUStrategyV1("/device:IPU:1").scope():
        v1 = tf.Variable(1.0)
    assert v0.device != v1.device
    assert v0.device.endswith(":0") and v1.device.endswith(":1")


@pytest.mark.follows("test_inference_step_fn_keras_model")
def test_inference_step_fn_keras_model(strategy):
    with strategy.scope():
        model = keras.Sequential(
            [keras.layers.Dense(5), keras.layers.Dense(10), keras.layers.Softmax()]
        )
        out = strategy.run(tf.function(lambda x: model(x)), args=[np.ones((1, 2), np.float32)])
    # The original also asserts the device is IPU:0 (see test_create_variable) and one
    # execution in the profile (awaiting the cost model).
    np.testing.assert_allclose(np.sum(out.numpy()), 1.0, rtol=1e-6)


@pytest.mark.follows("test_building_model_by_passing_input_shape_to_first_layer")
def test_building_model_by_passing_input_shape_to_first_layer(strategy):
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.layers.Dense(5, input_shape=(2,)),
                keras.layers.Dense(10),
                keras.layers.Softmax(),
            ]
        )
        assert model.built
        assert len(model.variables) == 4


@pytest.mark.follows("test_building_model_explicitly")
def test_building_model_explicitly(strategy):
    with strategy.scope():
        model = keras.Sequential(
            [keras.layers.Dense(5), keras.layers.Dense(10), keras.layers.Softmax()]
        )
        assert not model.built
        model.build(input_shape=(None, 2))
        assert model.built
        assert len(model.variables) == 4


@pytest.mark.follows("test_model_with_autograph_loop")
def test_model_with_autograph_loop(strategy):
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, activation="relu")])

        @tf.function
        def step_fn(x):
            while x[0] < 0.0:
                x = model(x)
            return x

        out = strategy.run(step_fn, args=[-1.0 * np.ones((1, 1), np.float32)])
    assert out.numpy().item() >= 0.0


def _train_twice(strategy, layer):
    with strategy.scope():
        model = keras.Sequential([layer])
        optimizer = keras.optimizers.SGD(0.01)

        @tf.function
        def step_fn(features, labels):
            with tf.GradientTape() as tape:
                predictions = model(features, training=True)
                loss = tf.reduce_mean(keras.losses.mean_squared_error(labels, predictions))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        x = np.ones((5, 10), np.float32)
        y = np.ones((5, 1), np.float32)
        return float(strategy.run(step_fn, args=[x, y])), float(strategy.run(step_fn, args=[x, y]))


@pytest.mark.follows("test_train_step_fn_keras_model")
def test_train_step_fn_keras_model(strategy):
    first, second = _train_twice(strategy, keras.layers.Dense(1))
    assert second < first


@pytest.mark.follows("test_train_step_fn_keras_model_known_input_size")
def test_train_step_fn_keras_model_known_input_size(strategy):
    first, second = _train_twice(strategy, keras.layers.Dense(1, input_shape=[10]))
    assert second < first


def _fit_losses(strategy, layers, n, batch_size, epochs, **fit_args):
    x, y = _mnist_like(n)
    with strategy.scope():
        model = keras.models.Sequential(layers)
        model.compile(
            loss=keras.losses.categorical_crossentropy, optimizer=keras.optimizers.SGD(0.05)
        )
        history = model.fit(
            x, y, batch_size=batch_size, shuffle=False, epochs=epochs, verbose=0, **fit_args
        )
    return history.history["loss"]


@pytest.mark.follows("test_keras_mnist_model_compile_fit")
@pytest.mark.slow
def test_keras_mnist_model_compile_fit(strategy):
    tf.keras.utils.set_random_seed(1)
    losses = _fit_losses(
        strategy,
        [
            keras.layers.Conv2D(8, (3, 3)),
            keras.layers.Dropout(0.25),
            keras.layers.Flatten(),
            keras.layers.Dense(10, activation="softmax"),
        ],
        n=100,
        batch_size=10,
        epochs=3,
    )
    assert len(losses) == 3
    assert losses[2] < losses[1] < losses[0]


@pytest.mark.follows("test_keras_mnist_model_compile_fit_fixed_input")
def test_keras_mnist_model_compile_fit_fixed_input(strategy):
    tf.keras.utils.set_random_seed(1)
    losses = _fit_losses(
        strategy,
        [
            keras.layers.Conv2D(8, (3, 3), input_shape=[28, 28, 1]),
            keras.layers.Flatten(),
            keras.layers.Dense(10, activation="softmax"),
        ],
        n=20,
        batch_size=2,
        epochs=3,
    )
    assert len(losses) == 3
    assert losses[2] < losses[1] < losses[0]


@pytest.mark.follows("test_keras_mnist_model_compile_fit_fixed_input_w_validation")
@pytest.mark.slow
def test_keras_mnist_model_compile_fit_fixed_input_w_validation(strategy):
    tf.keras.utils.set_random_seed(1)
    x_valid, y_valid = _mnist_like(240, seed=1)
    losses = _fit_losses(
        strategy,
        [keras.layers.Flatten(), keras.layers.Dense(10, activation="softmax")],
        n=1000,
        batch_size=10,
        epochs=3,
        validation_data=(x_valid, y_valid),
        validation_steps=8,
    )
    assert len(losses) == 3
    assert losses[2] < losses[1] < losses[0]


@pytest.mark.follows("test_unsupported_data_types")
def test_unsupported_data_types(strategy):
    with strategy.scope():
        with pytest.raises(TypeError, match="Unsupported data type for input: float64"):
            strategy.run(tf.function(lambda x: x), args=[np.array(1.0, np.float64)])
        with pytest.raises(TypeError, match="Unsupported data type for output: float64"):
            strategy.run(
                tf.function(lambda x: tf.cast(x, np.float64)), args=[np.array(1.0, np.float32)]
            )


@pytest.mark.follows("test_allowed_function_types_in_eager_mode")
def test_allowed_function_types_in_eager_plain_function_refused(strategy):
    with strategy.scope():
        with pytest.raises(ValueError, match="does not support eager execution"):
            strategy.run(lambda x: x, args=[tf.constant(1.0)])


@pytest.mark.follows("test_allowed_function_types_in_eager_mode")
def test_allowed_function_types_in_eager_mode(strategy):
    inputs = tf.constant(1.0, dtype=np.float32)
    traced_eagerly = []

    def identity(x):
        traced_eagerly.append(tf.executing_eagerly())
        return x

    with strategy.scope():
        assert tf.executing_eagerly()

        @tf.function
        def wrapper():
            return strategy.run(identity, args=[inputs])

        assert float(wrapper()) == 1.0
        tf_function = tf.function(identity)
        assert float(strategy.run(tf_function, args=[inputs])) == 1.0
        concrete = tf_function.get_concrete_function(tf.TensorSpec(inputs.shape, inputs.dtype))
        assert float(strategy.run(concrete, args=[inputs])) == 1.0
    assert traced_eagerly and not any(traced_eagerly)


@pytest.mark.follows("test_outfeed_async_dequeue_eager")
@pytest.mark.parametrize("delay", [0, 0.001, 1])
def test_outfeed_async_dequeue_eager(strategy, delay):
    num_iterations = 500
    dataset = tf.data.Dataset.range(num_iterations).map(
        lambda i: tf.reshape(tf.cast(i, tf.float32), [1])
    )
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    @tf.function
    def training_step(num_iteration, iterator):
        x = tf.constant(0.0, np.float32)
        for _ in tf.range(num_iteration):
            j = next(iterator)[0]
            outfeed.enqueue(j)
            x = x + 1
        return x

    with strategy.scope():
        dequeued = []

        def dequeue():
            counter = 0
            while counter != num_iterations:
                time.sleep(delay)
                r = outfeed.dequeue()
                if isinstance(r, list):  # nothing enqueued yet (as the original's [])
                    time.sleep(0.001)
                    continue
                for t in r.numpy():
                    dequeued.append((counter, t))
                    counter += 1

        # The original's thread dies on `[].numpy()` when it polls before the program is
        # traced, and its check then passes on no samples; this one waits for the data.
        thread = threading.Thread(target=dequeue, daemon=True)
        thread.start()
        strategy.run(training_step, args=[num_iterations, iter(dataset)])
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert [c for c, _ in dequeued] == list(range(num_iterations))
    assert [float(t) for _, t in dequeued] == list(range(num_iterations))


@pytest.mark.follows("test_dataset_iterator")
def test_dataset_iterator(ipu_system):
    dataset = tf.data.Dataset.from_tensors(1.0)
    with ipu.ipu_strategy.IPUStrategyV1().scope():
        iterator = iter(dataset)
        assert isinstance(iterator, ipu.ipu_infeed_queue.IPUOwnedIterator)
        with pytest.raises(RuntimeError, match="Accessing dataset elements"):
            next(iterator)
    with ipu.ipu_strategy.IPUStrategyV1(enable_dataset_iterators=False).scope():
        iterator = iter(dataset)
        assert not isinstance(iterator, ipu.ipu_infeed_queue.IPUOwnedIterator)
        assert float(next(iterator)) == 1.0


@pytest.mark.follows("test_dataset_iterator_with_function")
def test_dataset_iterator_with_function(strategy):
    dataset = tf.data.Dataset.from_tensors(1.0).repeat()
    with strategy.scope():
        iterator = iter(dataset)

        @tf.function(jit_compile=True)
        def step_fn(iterator):
            x = next(iterator)
            for _ in tf.range(5):
                x += next(iterator)
            return x

        np.testing.assert_allclose(strategy.run(step_fn, args=(iterator,)), 6.0)


@pytest.mark.follows("test_loss_scale_optimizer_supported")
def test_loss_scale_optimizer_supported():
    with ipu.ipu_strategy.IPUStrategyV1().scope():
        keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD())


@pytest.mark.follows("test_distribute_datasets_from_function")
def test_distribute_datasets_from_function():
    strategy = ipu.ipu_strategy.IPUStrategyV1()
    contexts = []
    with strategy.scope():

        def create_dataset(input_context):
            contexts.append((input_context.input_pipeline_id, input_context.num_input_pipelines))
            return tf.data.Dataset.from_tensor_slices([1, 2, 3, 4])

        dataset = strategy.distribute_datasets_from_function(create_dataset)
        assert len(dataset) == 4
    assert contexts == [(0, 1)]


@pytest.mark.follows("test_int32_only_output")
def test_int32_only_output(strategy):
    with strategy.scope():

        @tf.function(jit_compile=False)
        def fn(x):
            return tf.cast(x, np.int32)

        assert strategy.run(fn, args=([1.0, 2.0],)).numpy().tolist() == [1, 2]
