"""IPUStrategy (tensorflow2-support.txt 4.2, keras-extensions.md)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu

from openipu._src.system import configure


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


def test_is_a_distribution_strategy_with_the_documented_arguments(ipu_system):
    strategy = ipu.ipu_strategy.IPUStrategy(
        enable_dataset_iterators=False, enable_keras_extensions=False
    )
    assert isinstance(strategy, tf.compat.v1.distribute.Strategy)  # StrategyV1, as the original
    assert ipu.ipu_strategy.IPUStrategyV1 is ipu.ipu_strategy.IPUStrategy
    assert not strategy.enable_dataset_iterators and not strategy.enable_keras_extensions
    assert strategy.num_replicas_in_sync == 1


def test_a_non_ipu_device_runs_fn_there_as_plain_tensorflow():
    # tensorflow/python/ipu/ipu_strategy.py accepts any device string: `fn` runs on that
    # device, variables live there and reductions outside an IPU leave the value as it is.
    strategy = ipu.ipu_strategy.IPUStrategy(ipu_device="/device:CPU:0")
    with strategy.scope():
        v = tf.Variable([1.0, 2.0])

    @tf.function
    def step(x):
        v.assign_add(x)
        total = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, v * 2.0)
        return total

    out = strategy.run(step, args=(tf.constant([0.5, 0.5]),))
    np.testing.assert_allclose(out.numpy(), np.array([3.0, 5.0]))
    assert "CPU" in v.device
    with pytest.raises(TypeError, match="Unsupported data type for input: float64"):
        strategy.run(step, args=(tf.constant([0.5, 0.5], tf.float64),))


def test_run_and_experimental_run_v2(strategy):
    fn = tf.function(lambda x: x * 3.0, jit_compile=True)
    assert float(strategy.run(fn, args=(2.0,))) == 6.0
    assert float(strategy.experimental_run_v2(fn, args=(2.0,))) == 6.0
    # As the original's IPUStrategyV1 (ipu_strategy.py `_validate_run_function`), a plain
    # Python function runs only inside a function being traced.
    with pytest.raises(ValueError, match=r"does not support eager execution"):
        strategy.run(lambda x: x + 1.0, args=(tf.constant(1.0),))
    wrapped = tf.function(lambda x: strategy.run(lambda y: y + 1.0, args=(x,)))
    assert float(wrapped(tf.constant(1.0))) == 2.0


def test_run_before_configuration_fails_clearly():
    configure.reset_ipu_configuration()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with pytest.raises(
        tf.errors.FailedPreconditionError,
        match="No device target has been configured.*IPUStrategy.run needs",
    ):
        strategy.run(tf.function(lambda: tf.constant(1.0)))


def test_variables_live_on_the_ipus_host_device(strategy, ipu_system):
    with strategy.scope():
        variable = tf.Variable(1.0)
    assert variable.device.endswith(ipu_system.device(0).host_device().split("/device:")[1])


def test_training_loop_with_next_iterator_and_outfeed(strategy):
    """The published TF2 pattern: next(iterator) and enqueue inside a jit-compiled loop."""
    rng = np.random.default_rng(1)
    xs = rng.normal(size=(64, 4)).astype(np.float32)
    ys = (xs @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(8, drop_remainder=True).repeat()
    with strategy.scope():
        w = tf.Variable(tf.zeros([4, 1]))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        iterator = iter(dataset)

        @tf.function(jit_compile=True)
        def training_loop(iterator, steps):
            for _ in tf.range(steps):
                x, y = next(iterator)
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(x @ w - y))
                w.assign_sub(0.1 * tape.gradient(loss, w))
                outfeed.enqueue(loss)

        strategy.run(training_loop, args=(iterator, 16))
    losses = outfeed.dequeue().numpy()

    w_ref = np.zeros((4, 1), np.float32)
    expected = []
    for step in range(16):
        x, y = xs[(step % 8) * 8 : (step % 8 + 1) * 8], ys[(step % 8) * 8 : (step % 8 + 1) * 8]
        error = x @ w_ref - y
        expected.append(np.mean(error**2))
        w_ref -= 0.1 * 2 / error.size * x.T @ error
    np.testing.assert_allclose(losses, expected, rtol=1e-4)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=1e-4, atol=1e-6)


def _mlp(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [keras.layers.Dense(16, activation="relu", input_shape=(8,)), keras.layers.Dense(3)]
    )


def test_keras_fit_with_steps_per_execution_matches_stock_keras(strategy):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(96, 8)).astype(np.float32)
    y = rng.integers(0, 3, size=(96,)).astype(np.int32)  # IPU infeeds carry no int64
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    reference = _mlp(7)
    reference.compile(keras.optimizers.SGD(0.05), loss)
    reference.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)

    with strategy.scope():
        model = _mlp(7)
        model.compile(keras.optimizers.SGD(0.05), loss, steps_per_execution=4)
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert len(history.history["loss"]) == 2
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_same_seed_gives_the_same_random_numbers(strategy):
    @tf.function(jit_compile=True)
    def draw():
        return tf.random.uniform([5])

    ipu.utils.reset_ipu_seed(42)
    first = strategy.run(draw).numpy()
    second = strategy.run(draw).numpy()
    ipu.utils.reset_ipu_seed(42)
    again = strategy.run(draw).numpy()
    ipu.utils.reset_ipu_seed(43)
    other = strategy.run(draw).numpy()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, second)
    assert not np.array_equal(first, other)
