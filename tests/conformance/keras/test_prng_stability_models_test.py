"""Conformance: graphcore/keras `keras/ipu/prng_stability_models_test.py`.

With `experimental.enable_prng_stability` and stochastic rounding configured
(`floating_point_behaviour.esr` ON or REPLICA_IDENTICAL_ONLY) and Keras' float type
float16, replicated models (pipelined on 2 IPUs per replica, or one IPU each) trained with
`fit` keep their weights identical on every replica: an optimizer wrapper (a TF1 optimizer
around the Keras optimizer, as the original's) sends each step's kernels to an outfeed,
and every replica's values are compared. The emulated IPUs round to nearest (they have no
stochastic rounding), so what is checked here is the replicas' agreement itself (each
model runs in one of the two modes, which here change nothing). Random
data with the original's shapes replace its MNIST and IMDB downloads (there is no
network), with fewer steps, shorter sequences and smaller layers.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu
from tensorflow.python.training.optimizer import Optimizer

IPU_COUNT = 4


class KernelLoggingOptimizer(Optimizer):
    """Sends the kernels to `outfeed_queue` before `wrapped_optimizer` applies a step."""

    def __init__(self, outfeed_queue, wrapped_optimizer, model):
        super().__init__(False, "KernelLoggingOptimizer")
        self._wrapped_optimizer = wrapped_optimizer
        self._outfeed_queue = outfeed_queue
        self._model = model

    def compute_gradients(self, loss, var_list=None, **kwargs):
        del var_list, kwargs
        grads = self._wrapped_optimizer.get_gradients(loss, self._model.trainable_weights)
        return list(zip(grads, self._model.trainable_weights, strict=True))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        del global_step, name
        kernels = [v for _, v in reversed(grads_and_vars) if "kernel" in v.name]
        outfeed = self._outfeed_queue.enqueue(kernels)
        with tf.control_dependencies([outfeed]):
            return self._wrapped_optimizer.apply_gradients(grads_and_vars)


MODES = {
    "StochasticRounding_ON": ipu.config.StochasticRoundingBehaviour.ON,
    "StochasticRounding_REPLICA_IDENTICAL_ONLY": (
        ipu.config.StochasticRoundingBehaviour.REPLICA_IDENTICAL_ONLY
    ),
}


@pytest.fixture
def prng_stable_ipus():
    """The original's setUpTest for a stochastic rounding mode: 4 IPUs, stochastic rounding,
    PRNG stability, float16; gives the kernels' outfeed."""
    floatx = keras.backend.floatx()

    def configure(mode):
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = IPU_COUNT
        config.floating_point_behaviour.esr = MODES[mode]
        config.experimental.enable_prng_stability = True
        config.configure_ipu_system()
        keras.backend.set_floatx("float16")
        return ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    yield configure
    keras.backend.set_floatx(floatx)
    ipu.config.reset_ipu_configuration()


# The original runs each model in both modes; here each runs in one of them (the emulated
# IPUs' rounding does not depend on it), the modes alternating.
ON, REPLICA_IDENTICAL_ONLY = MODES


def _check_replica_identical(outfeed, replicas):
    logged = outfeed.dequeue()
    assert logged, "no kernels logged"
    for kernel in logged:
        values = np.asarray(kernel)  # (steps, replicas, ...)
        assert values.shape[1] == replicas, values.shape
        for step in values:
            for replica in step[1:]:
                np.testing.assert_array_equal(replica, step[0])


def _mnist_like(categorical):
    rng = np.random.default_rng(5)
    x = rng.uniform(size=(512, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, size=512)
    y = keras.utils.to_categorical(y, 10) if categorical else y.astype(np.float32)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(32, drop_remainder=True).repeat()


# The original's reviews are padded to 80 words; 4 here, as each LSTM step adds to the program.
SEQUENCE = 4


def _imdb_like(max_features, minibatch_size):
    rng = np.random.default_rng(6)
    x = rng.integers(0, max_features, size=(256, SEQUENCE)).astype(np.int32)
    y = rng.integers(0, 2, size=256).astype(np.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    return ds.batch(minibatch_size, drop_remainder=True)


@pytest.mark.follows("testLinearRegression")
def test_linear_regression(prng_stable_ipus):
    outfeed = prng_stable_ipus(ON)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        rng = np.random.default_rng(1234)
        horsepower = rng.random((320, 1)).astype(np.float32)
        mpg = rng.random((320, 1)).astype(np.float32)
        normalizer = keras.layers.Normalization(input_shape=[1], axis=None)
        model = keras.Sequential([normalizer, keras.layers.Dense(units=1)])
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        model.set_pipeline_stage_assignment([0, 1])
        model.compile(
            optimizer=KernelLoggingOptimizer(outfeed, keras.optimizers.legacy.Adam(0.1), model),
            loss="mean_absolute_error",
            steps_per_execution=16,
        )
        model.fit(horsepower, mpg, epochs=2, steps_per_epoch=16, verbose=0)
    _check_replica_identical(outfeed, 2)


@pytest.mark.slow
@pytest.mark.follows("testImdbRnn")
def test_imdb_rnn(prng_stable_ipus):
    outfeed = prng_stable_ipus(REPLICA_IDENTICAL_ONLY)
    max_features, minibatch_size = 100, 8
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.layers.Input(shape=(SEQUENCE), dtype=np.int32, batch_size=minibatch_size),
                keras.layers.Embedding(max_features, 8),
                keras.layers.Bidirectional(keras.layers.LSTM(4)),
                keras.layers.Dense(4, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        model.set_pipeline_stage_assignment([0, 0, 1, 1])
        model.compile(
            loss=keras.losses.BinaryCrossentropy(from_logits=True),
            optimizer=KernelLoggingOptimizer(outfeed, keras.optimizers.legacy.Adam(1e-4), model),
            steps_per_execution=8,
        )
        model.fit(_imdb_like(max_features, minibatch_size), steps_per_epoch=8, epochs=1, verbose=0)
    _check_replica_identical(outfeed, 2)


@pytest.mark.follows("testImdb")
def test_imdb(prng_stable_ipus):
    outfeed = prng_stable_ipus(ON)
    max_features, minibatch_size = 200, 8
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        inputs = keras.layers.Input(shape=(SEQUENCE), dtype=np.int32, batch_size=minibatch_size)
        with keras.ipu.PipelineStage(0):
            x = keras.layers.Embedding(max_features, 16)(inputs)
        with keras.ipu.PipelineStage(1):
            x = keras.layers.Dropout(0.2)(x)
            x = keras.layers.GlobalAveragePooling1D()(x)
            x = keras.layers.Dropout(0.2)(x)
            x = keras.layers.Dense(1)(x)
        model = keras.Model(inputs, x)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        model.compile(
            steps_per_execution=8,
            loss="binary_crossentropy",
            optimizer=KernelLoggingOptimizer(outfeed, keras.optimizers.legacy.Adam(0.005), model),
        )
        model.fit(_imdb_like(max_features, minibatch_size), steps_per_epoch=8, epochs=2, verbose=0)
    _check_replica_identical(outfeed, 2)


@pytest.mark.follows("testMnistCnn")
def test_mnist_cnn(prng_stable_ipus):
    outfeed = prng_stable_ipus(REPLICA_IDENTICAL_ONLY)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.layers.Conv2D(8, kernel_size=3, activation="relu", input_shape=(28, 28, 1)),
                keras.layers.Conv2D(4, kernel_size=3, activation="relu"),
                keras.layers.Flatten(),
                keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(
            loss="categorical_crossentropy",
            optimizer=KernelLoggingOptimizer(outfeed, keras.optimizers.legacy.SGD(), model),
            steps_per_execution=4,
        )
        model.fit(_mnist_like(categorical=True), epochs=2, steps_per_epoch=4, verbose=0)
    _check_replica_identical(outfeed, IPU_COUNT)


@pytest.mark.follows("testMnist")
def test_mnist(prng_stable_ipus):
    outfeed = prng_stable_ipus(ON)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.layers.Flatten(),
                keras.layers.Dense(32, activation="relu"),
                keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        model.set_pipeline_stage_assignment([0, 1, 1])
        model.compile(
            loss=keras.losses.SparseCategoricalCrossentropy(),
            optimizer=KernelLoggingOptimizer(outfeed, keras.optimizers.legacy.SGD(), model),
            steps_per_execution=8,
        )
        model.fit(_mnist_like(categorical=False), epochs=2, steps_per_epoch=8, verbose=0)
    _check_replica_identical(outfeed, 2)
