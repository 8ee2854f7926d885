"""Conformance: graphcore/keras `keras/ipu/asynchronous_callbacks_test.py`.

With `set_asynchronous_callbacks(True)`, batch callbacks are called once per step in
fit, evaluate and predict (single IPU, replicated, pipelined), and the trained model
matches a CPU model that accumulates by taking batches 16 times larger. A pipelined
model that accumulates its outfeed calls evaluate's callbacks once per execution and
replica group; predict still per step. Smaller images than the original's MNIST
(random data of 4x4 pixels) keep it fast.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

BATCH = 12
ACCUMULATION = 16
STEPS_PER_EPOCH = 64
EPOCHS = 2


def _datasets(batch_size):
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(BATCH * STEPS_PER_EPOCH, 4, 4)).astype(np.float32)
    y = rng.integers(0, 10, size=(BATCH * STEPS_PER_EPOCH,)).astype(np.float32)
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size, drop_remainder=True)
    predict = tf.data.Dataset.from_tensor_slices(x).batch(batch_size, drop_remainder=True)
    return train.repeat(), predict.repeat()


def _dense():
    return keras.layers.Dense(
        10,
        activation="softmax",
        kernel_initializer=keras.initializers.Constant(0.5),
        bias_initializer="zeros",
    )


def _sequential(pipeline):
    model = keras.Sequential([keras.layers.Flatten(input_shape=(4, 4)), _dense()])
    if pipeline:
        model.set_pipeline_stage_assignment([0, 1])
    return model


def _functional(pipeline):
    inputs = keras.layers.Input((4, 4))
    model = keras.Model(inputs, _dense()(keras.layers.Flatten()(inputs)))
    if pipeline:
        assignments = model.get_pipeline_stage_assignment()
        assignments[0].pipeline_stage = 0
        assignments[1].pipeline_stage = 1
        model.set_pipeline_stage_assignment(assignments)
    return model


class CountingCallback(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.counts = {
            f"{m}_batch_{e}": 0 for m in ("train", "test", "predict") for e in ("begin", "end")
        }

    def _count(name):
        def hook(self, *args, **kwargs):
            self.counts[name] += 1

        return hook

    on_train_batch_begin = _count("train_batch_begin")
    on_train_batch_end = _count("train_batch_end")
    on_test_batch_begin = _count("test_batch_begin")
    on_test_batch_end = _count("test_batch_end")
    on_predict_batch_begin = _count("predict_batch_begin")
    on_predict_batch_end = _count("predict_batch_end")


@pytest.mark.follows("testCounting")
@pytest.mark.parametrize(
    "model_fn,replicas,pipelined",
    [
        (_sequential, 1, False),
        (_functional, 1, False),
        (_sequential, 2, False),
        pytest.param(_functional, 2, False, marks=pytest.mark.slow),
        pytest.param(_sequential, 2, True, marks=pytest.mark.slow),
        (_functional, 2, True),
    ],
)
def test_counting(strategy_on, model_fn, replicas, pipelined):
    accumulation_per_replica = ACCUMULATION // replicas
    train, predict = _datasets(BATCH)
    cpu_train, _ = _datasets(BATCH * ACCUMULATION)

    cpu = model_fn(False)
    cpu.compile(keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy())
    cpu.fit(cpu_train, steps_per_epoch=STEPS_PER_EPOCH // ACCUMULATION, epochs=EPOCHS, verbose=0)
    cpu_eval = cpu.evaluate(train, steps=STEPS_PER_EPOCH, verbose=0)
    cpu_predict = cpu.predict(predict, steps=STEPS_PER_EPOCH, verbose=0)

    strategy = strategy_on(replicas * (2 if pipelined else 1))
    with strategy.scope():
        model = model_fn(pipelined)
        model.compile(
            keras.optimizers.SGD(0.01 / replicas),
            keras.losses.SparseCategoricalCrossentropy(),
            steps_per_execution=accumulation_per_replica,
        )
        model.set_asynchronous_callbacks(True)
        options = dict(
            gradient_accumulation_steps_per_replica=accumulation_per_replica,
            gradient_accumulation_reduction_method="mean",
        )
        if pipelined:
            model.set_pipelining_options(**options)
        else:
            model.set_gradient_accumulation_options(**options)
        callback = CountingCallback()
        model.fit(
            train, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS, callbacks=[callback], verbose=0
        )
        assert callback.counts["train_batch_begin"] == STEPS_PER_EPOCH * EPOCHS
        assert callback.counts["train_batch_end"] == STEPS_PER_EPOCH * EPOCHS
        ipu_weights = model.get_weights()
        ipu_eval = model.evaluate(train, steps=STEPS_PER_EPOCH, callbacks=[callback], verbose=0)
        assert callback.counts["test_batch_begin"] == STEPS_PER_EPOCH
        assert callback.counts["test_batch_end"] == STEPS_PER_EPOCH
        ipu_predict = model.predict(predict, steps=STEPS_PER_EPOCH, callbacks=[callback], verbose=0)
        assert callback.counts["predict_batch_begin"] == STEPS_PER_EPOCH
        assert callback.counts["predict_batch_end"] == STEPS_PER_EPOCH

        if pipelined:
            model.set_pipelining_options(accumulate_outfeed=True, **options)
            callback = CountingCallback()
            model.evaluate(train, steps=STEPS_PER_EPOCH, callbacks=[callback], verbose=0)
            executions = STEPS_PER_EPOCH // (accumulation_per_replica * replicas)
            assert callback.counts["test_batch_begin"] == executions
            assert callback.counts["test_batch_end"] == executions
            model.predict(predict, steps=STEPS_PER_EPOCH, callbacks=[callback], verbose=0)
            assert callback.counts["predict_batch_begin"] == STEPS_PER_EPOCH

    tolerance = 1e-3 if replicas > 1 else 1e-5
    for ours, theirs in zip(ipu_weights, cpu.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ipu_eval, cpu_eval, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(ipu_predict, cpu_predict, rtol=tolerance, atol=tolerance)
