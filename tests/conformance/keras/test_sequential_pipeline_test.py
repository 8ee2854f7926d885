"""Conformance: graphcore/keras `keras/ipu/sequential_pipeline_test.py`.

A Sequential model pipelined over 2 IPUs (`set_pipeline_stage_assignment`): the
original's RuntimeError when `steps_per_execution` is not divisible by the accumulation
steps; training (with class weights) matches a CPU model on batches as large as the
accumulated ones; batch callbacks once per execution; a second fit continues training
(the original also counts compilations in Poplar reports, which are not kept here);
history holds per-epoch floats; accumulating the outfeed changes no result; evaluate
(with and without labels) matches the CPU; the accumulation dtype getter sees the
variables' float16 and the optimizer gets float32 gradients.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from keras_pipeline_checks import (
    BatchCallbackCounter,
    check_accumulated_outfeed_changes_nothing,
    check_fit_twice,
    check_history_of_floats,
    dataset,
    inference_dataset,
)


def _simple_pipeline():
    model = keras.Sequential([keras.layers.Dense(4) for _ in range(3)] + [keras.layers.Dense(8)])
    model.set_pipeline_stage_assignment([0, 0, 0, 1])
    return model


def _fixed_weight_model(dtype=None):
    init = keras.initializers.Constant(0.1)
    return keras.Sequential(
        [
            keras.layers.Dense(4, name="layer0", kernel_initializer=init, dtype=dtype),
            keras.layers.Dense(2, name="layer1", kernel_initializer=init, dtype=dtype),
        ]
    )


def _fixed_weight_pipeline(dtype=None):
    model = _fixed_weight_model(dtype)
    model.set_pipeline_stage_assignment([0, 1])
    return model


@pytest.fixture
def strategy(strategy_on):
    return strategy_on(2)


def _pipelined(**options):
    model = _fixed_weight_pipeline()
    model.set_pipelining_options(
        gradient_accumulation_steps_per_replica=8,
        gradient_accumulation_reduction_method="mean",
        **options,
    )
    return model


@pytest.mark.follows("testGradientAccumulationSteps")
def test_gradient_accumulation_steps(strategy):
    with strategy.scope():
        model = _simple_pipeline()
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=7)
        model.compile("sgd", loss="mse", steps_per_execution=16)
        with pytest.raises(
            RuntimeError,
            match=r"The pipelined model has been configured to use gradient accumulation for "
            r"training, however the current `steps_per_execution` value \(set to 16\) is not "
            r"divisible by `gradient_accumulation_steps_per_replica` \(7\)",
        ):
            model.fit(dataset(length=64), epochs=4, verbose=0)


@pytest.mark.follows("testFitCpuMatch")
def test_fit_cpu_match(strategy):
    class_weight = {0: 0.0, 1: 0.1, 2: 0.9}
    cpu = _fixed_weight_model()
    cpu.compile("sgd", loss="mse")
    cpu.fit(dataset(length=96, batch_size=8), epochs=2, class_weight=class_weight, verbose=0)
    with strategy.scope():
        model = _pipelined()
        model.compile("sgd", loss="mse", steps_per_execution=16)
        model.fit(dataset(length=96), epochs=2, class_weight=class_weight, verbose=0)
    for ours, theirs in zip(model.get_weights(), cpu.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.follows("testFitHistoryStepsPerRun")
def test_fit_history_steps_per_run(strategy):
    with strategy.scope():
        model = _pipelined()
        model.compile("sgd", loss="mse", steps_per_execution=16)
        model.fit(dataset(length=96), epochs=2, verbose=0)
        callback = BatchCallbackCounter()
        model.fit(dataset(length=96), callbacks=[callback], verbose=0)
    assert callback.count == 96 // 16


@pytest.mark.follows("testFitTwice")
def test_fit_twice(strategy):
    with strategy.scope():
        model = _pipelined()
        model.compile("sgd", loss="mse", steps_per_execution=16)
        check_fit_twice(model, dataset())


@pytest.mark.follows("testFitWithMetrics")
def test_fit_with_metrics(strategy):
    with strategy.scope():
        check_history_of_floats(_pipelined())


@pytest.mark.follows("testFitAndEvaluateAccumulateOutfeed")
def test_fit_and_evaluate_accumulate_outfeed(strategy):
    with strategy.scope():
        model = _fixed_weight_pipeline()
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
        accumulating = _fixed_weight_pipeline()
        accumulating.set_pipelining_options(
            gradient_accumulation_steps_per_replica=8, accumulate_outfeed=True
        )
        optimizer = keras.optimizers.legacy.SGD(learning_rate=0.0001)
        check_accumulated_outfeed_changes_nothing(model, accumulating, optimizer)


@pytest.mark.follows("testEval_CpuMatch")
def test_eval_cpu_match(strategy):
    with strategy.scope():
        model = _fixed_weight_pipeline()
        model.compile("sgd", loss="mse", steps_per_execution=32)
        result = model.evaluate(dataset(length=96), verbose=0)
    cpu = _fixed_weight_model()
    cpu.compile("sgd", loss="mse", steps_per_execution=32)
    np.testing.assert_allclose(result, cpu.evaluate(dataset(length=96), verbose=0), rtol=1e-6)


@pytest.mark.follows("testPredict_CpuMatch")
def test_predict_cpu_match(strategy):
    with strategy.scope():
        model = _fixed_weight_pipeline()
        model.compile(steps_per_execution=32)
        result = model.evaluate(inference_dataset(length=96), verbose=0)
    cpu = _fixed_weight_model()
    cpu.compile(steps_per_execution=32)
    np.testing.assert_allclose(result, cpu.evaluate(inference_dataset(length=96), verbose=0))


@pytest.mark.follows("testGradientAccumulationDtype")
def test_gradient_accumulation_dtype(strategy):
    seen_variables, seen_gradients = [], []

    def dtype_getter(var):
        seen_variables.append(var.dtype)
        return np.float32

    class CastSGD(keras.optimizers.legacy.SGD):
        def apply_gradients(self, grads_and_vars, name=None, **kwargs):
            cast = []
            for g, v in grads_and_vars:
                seen_gradients.append(g.dtype)
                cast.append((tf.cast(g, v.dtype), v))
            return super().apply_gradients(cast, name, **kwargs)

    with strategy.scope():
        model = _fixed_weight_pipeline(dtype=np.float16)
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=24, gradient_accumulation_dtype=dtype_getter
        )
        model.compile(CastSGD(), loss="mse", steps_per_execution=24)
        model.fit(
            dataset(x_val=np.float16(1.0), y_val=np.float16(0.2), length=48), epochs=1, verbose=0
        )
    assert seen_variables and set(seen_variables) == {tf.float16}
    assert seen_gradients and set(seen_gradients) == {tf.float32}
