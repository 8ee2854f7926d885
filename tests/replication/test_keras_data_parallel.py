"""Automatic data parallelism: R replicas of batch b train like one replica of batch R * b.

As on the original, the replicas' gradients are summed (tensorflow/python/ipu/
ipu_strategy.py `_reduce_to` is a cross-replica sum, and Keras does not divide the
loss by `num_replicas_in_sync`, which is 1): one replica of the global batch matches
with R times the learning rate.
"""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras
from tensorflow.python import ipu


@pytest.fixture(autouse=True)
def _reset():
    yield
    ipu.config.reset_ipu_configuration()


def _data(samples=256):
    rng = np.random.default_rng(0)
    return (
        rng.normal(size=(samples, 8)).astype(np.float32),
        rng.normal(size=(samples, 2)).astype(np.float32),
    )


def _model():
    keras.utils.set_random_seed(4)
    model = keras.Sequential(
        [keras.layers.Dense(16, activation="tanh", input_shape=(8,)), keras.layers.Dense(2)]
    )
    return model


def _stock(x, y, batch_size, learning_rate):
    model = _model()
    model.compile(keras.optimizers.SGD(learning_rate), "mse")
    model.fit(x, y, batch_size=batch_size, epochs=2, shuffle=False, verbose=0)
    return model.get_weights()


@pytest.mark.parametrize("replicas", [2, 4])
@pytest.mark.parametrize("accumulation", [None, 2])
def test_replicas_train_like_one_replica_with_the_global_batch(replicas, accumulation):
    x, y = _data()
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = replicas
    config.configure_ipu_system()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _model()
        model.compile(keras.optimizers.SGD(0.1), "mse", steps_per_execution=4)
        if accumulation:
            model.set_gradient_accumulation_options(accumulation, "mean")
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    global_batch = 8 * replicas * (accumulation or 1)
    expected = _stock(x, y, global_batch, 0.1 * replicas)
    for ours, theirs in zip(model.get_weights(), expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    assert len(history.history["loss"]) == 2


def test_pipelined_model_replicates_over_a_larger_device():
    """A 2-IPU pipelined model on 4 IPUs: 2 replicas. Training two stages needs a multiple of
    4 accumulated batches per replica (the original's pipeline_visitor.cc)."""
    x, y = _data()
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 4
    config.configure_ipu_system()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        keras.utils.set_random_seed(4)
        inputs = keras.Input((8,))
        with keras.ipu.PipelineStage(0):
            hidden = keras.layers.Dense(16, activation="tanh")(inputs)
        with keras.ipu.PipelineStage(1):
            outputs = keras.layers.Dense(2)(hidden)
        model = keras.Model(inputs, outputs)
        model.compile(keras.optimizers.SGD(0.1), "mse", steps_per_execution=8)
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=4, gradient_accumulation_reduction_method="mean"
        )
        model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        predictions = model.predict(x, batch_size=8, verbose=0)
    for ours, theirs in zip(model.get_weights(), _stock(x, y, 8 * 4 * 2, 0.1 * 2), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    # Predictions come back in data order from both replicas.
    reference = _model()
    reference.set_weights(model.get_weights())
    np.testing.assert_allclose(predictions, reference.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


def test_a_model_needing_more_ipus_than_the_device_fails_clearly():
    x, y = _data()
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        inputs = keras.Input((8,))
        with keras.ipu.PipelineStage(0):
            hidden = keras.layers.Dense(4)(inputs)
        with keras.ipu.PipelineStage(1):
            hidden = keras.layers.Dense(4)(hidden)
        with keras.ipu.PipelineStage(2):
            outputs = keras.layers.Dense(2)(hidden)
        model = keras.Model(inputs, outputs)
        model.compile("sgd", "mse", steps_per_execution=4)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=2)
        with pytest.raises(
            ValueError,
            # The original's message (keras/ipu/extensions/extensions_base.py).
            match="Current device has 2 IPUs attached, however the current model requires a "
            "multiple of 4 IPUs",
        ):
            model.fit(x, y, batch_size=8, epochs=1, verbose=0)
