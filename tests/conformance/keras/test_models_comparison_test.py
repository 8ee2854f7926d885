"""Conformance: graphcore/keras `keras/ipu/models_comparison_test.py`.

On 4 IPUs, the same Adam training reaches the same weights and predictions as a
Sequential model with gradient accumulation (4 replicas), pipelined over 2 stages (2
replicas) and on the CPU with batches as large as one weight update's; a functional
model with accumulation equals its pipelined form (stages mapped to IPUs 1, 0, 1); a
Sequential and a functional model of the same layers train and predict alike.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

pytestmark = pytest.mark.slow  # trainings on 4 replicas: about 20 s each on one core


def _dataset(batch_size=1):
    features = [i * np.ones(4, np.float32) for i in range(10)]
    labels = [i * np.ones(1, np.int32) for i in range(10)]
    ds = tf.data.Dataset.from_tensor_slices((features, labels)).repeat()
    return ds.batch(batch_size, drop_remainder=True)


def _predict_inputs(length):
    return tf.data.Dataset.from_tensor_slices(
        [(i % 10) * np.ones((4, 4), np.float32) for i in range(length)]
    )


def _dense(w, activation=None, **kwargs):
    return keras.layers.Dense(
        4, activation=activation, kernel_initializer=keras.initializers.Constant(w), **kwargs
    )


def _close(a, b):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


@pytest.mark.follows("test_sequential_and_pipeline")
def test_sequential_and_pipeline(strategy_on):
    def layers():
        return [_dense(0.5, "relu"), _dense(0.5)]

    cpu = keras.Sequential(layers())
    cpu.compile(optimizer="adam", loss="mae")
    cpu.fit(_dataset(16), steps_per_epoch=1, epochs=2, verbose=0)
    predict_cpu = cpu.predict(_predict_inputs(32), steps=8, verbose=0)

    strategy = strategy_on(4)
    with strategy.scope():
        model = keras.Sequential(layers())
        model.set_gradient_accumulation_options(
            gradient_accumulation_steps_per_replica=4, gradient_accumulation_reduction_method="mean"
        )
        model.compile(optimizer="adam", loss="mae", steps_per_execution=16)
        model.fit(_dataset(), steps_per_epoch=16, epochs=2, verbose=0)
        _close(model.get_weights(), cpu.get_weights())
        predict_seq = model.predict(_predict_inputs(32), steps=8, verbose=0)

    with strategy.scope():
        model = keras.Sequential(layers())
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=8, gradient_accumulation_reduction_method="mean"
        )
        model.set_pipeline_stage_assignment([0, 1])
        model.compile(optimizer="adam", loss="mae", steps_per_execution=16)
        model.fit(_dataset(), steps_per_epoch=16, epochs=2, verbose=0)
        _close(model.get_weights(), cpu.get_weights())
        predict_pipeline = model.predict(_predict_inputs(32), steps=8, verbose=0)
    np.testing.assert_allclose(predict_seq, predict_pipeline, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(predict_seq, predict_cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.follows("test_functional_and_pipeline")
def test_functional_and_pipeline(strategy_on):
    def model_of(stages=None):
        inputs = keras.layers.Input(shape=(4))
        x = inputs
        for stage in stages or [None] * 3:
            if stage is None:
                x = _dense(0.5, "relu")(x)
            else:
                with keras.ipu.PipelineStage(stage):
                    x = _dense(0.5, "relu")(x)
        return keras.Model(inputs, x)

    strategy = strategy_on(4)
    with strategy.scope():
        model = model_of()
        model.set_gradient_accumulation_options(
            gradient_accumulation_steps_per_replica=6, gradient_accumulation_reduction_method="mean"
        )
        model.compile(optimizer="adam", loss="mae", steps_per_execution=24)
        model.fit(_dataset(), steps_per_epoch=24, epochs=2, verbose=0)
        model_weights = model.get_weights()
        predict_model = model.predict(_predict_inputs(48), verbose=0)
    with strategy.scope():
        model = model_of([0, 1, 2])
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=12,
            gradient_accumulation_reduction_method="mean",
            device_mapping=[1, 0, 1],
        )
        model.compile(optimizer="adam", loss="mae", steps_per_execution=24)
        model.fit(_dataset(), steps_per_epoch=24, epochs=2, verbose=0)
        _close(model.get_weights(), model_weights)
        np.testing.assert_allclose(
            model.predict(_predict_inputs(48), verbose=0), predict_model, rtol=1e-5, atol=1e-5
        )


@pytest.mark.follows("test_functional_and_sequential")
def test_functional_and_sequential(strategy_on):
    def layers():
        return [
            _dense(0.5, "relu", name="1"),
            _dense(0.45, "relu", name="2"),
            _dense(0.55, "relu", name="3"),
            _dense(0.61, name="4"),
        ]

    def functional():
        inputs = keras.layers.Input(shape=(4))
        x = inputs
        for layer in layers():
            x = layer(x)
        return keras.Model(inputs, x)

    strategy = strategy_on(4)
    results = []
    for make in (lambda: keras.Sequential(layers()), functional):
        with strategy.scope():
            model = make()
            model.compile("adam", loss="mse", steps_per_execution=4)
            history = model.fit(_dataset(), steps_per_epoch=8, epochs=2, verbose=0).history
            results.append((history, model.predict(_predict_inputs(48), verbose=0)))
    (history_seq, predict_seq), (history_model, predict_model) = results
    for key in history_seq:
        np.testing.assert_allclose(history_seq[key], history_model[key], rtol=1e-5)
    np.testing.assert_allclose(predict_model, predict_seq, rtol=1e-5, atol=1e-5)
