"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/pipelining_grouped_overlap_test.py`.

Grouped training pipelines with I/O tiles reserved (32, or none), so that the feeds'
transfers overlap computation on the original's IPUs: each trains like the same model
trained on the CPU with accumulated gradients (the models of `pipeline_scenarios`, plus
a pipeline whose infeed gives three tensors). The original's cycle counts and
`compare_pipeline_to_sharding` are a Poplar report and real sharding; here both are
compared with the CPU.
"""

from __future__ import annotations

import numpy as np
import pipeline_scenarios as scenarios
import pytest
import tensorflow as tf
from pipeline_comparison import Schedule, compare_to_cpu, increasing, placeholder_inputs

v1 = tf.compat.v1
SCHEDULE = Schedule.Grouped
IO_TILES = pytest.mark.parametrize("number_of_io_tiles", [0, 32])


@pytest.mark.follows("testPipelineCompare1")
def test_pipeline_compare1():
    compare_to_cpu(
        schedule=SCHEDULE,
        number_of_io_tiles=32,
        **scenarios.compare1(gradient_accumulation_count=24),
    )


@pytest.mark.slow
@pytest.mark.follows("testPipelineCompare2")
def test_pipeline_compare2():
    # At least the grouped schedule's 2 x 3 stages and 2 with I/O tiles.
    compare_to_cpu(
        schedule=SCHEDULE,
        number_of_io_tiles=32,
        **scenarios.compare2(gradient_accumulation_count=8),
    )


@pytest.mark.follows("testPipelineCompare3")
@IO_TILES
def test_pipeline_compare3(number_of_io_tiles):
    compare_to_cpu(
        schedule=SCHEDULE,
        number_of_io_tiles=number_of_io_tiles,
        **scenarios.compare3(gradient_accumulation_count=24),
    )


@pytest.mark.follows("testPipelineCompareSharedWeights")
@IO_TILES
def test_pipeline_compare_shared_weights(number_of_io_tiles):
    model = scenarios.shared_weights(1, gradient_accumulation_count=20)
    model["device_mapping"] = [0, 1, 2, 3, 0]
    compare_to_cpu(schedule=SCHEDULE, number_of_io_tiles=number_of_io_tiles, **model)


@pytest.mark.follows("testPipelineCompareSharedWeights2")
@pytest.mark.follows("testPipelineCompareSharedWeights3")
@pytest.mark.parametrize("variant", [2, 3])
@IO_TILES
def test_pipeline_compare_shared_weights_2_3(variant, number_of_io_tiles):
    model = scenarios.shared_weights(variant, gradient_accumulation_count=20)
    compare_to_cpu(schedule=SCHEDULE, number_of_io_tiles=number_of_io_tiles, **model)


def _three_input_dataset():
    dataset = increasing(7, [4, 4]).map(
        lambda value: (value, tf.cast(value[0][0] % 4, np.int32), value[1][1])
    )
    return dataset.batch(2, drop_remainder=True)


def _relu_matmuls(x):
    for name in ("w0", "w1"):
        weight = v1.get_variable(name, shape=[4, 4], initializer=v1.ones_initializer())
        x = tf.nn.relu(tf.matmul(x, weight))
    return x


def _scaled_stage(x, label, scale):
    with v1.variable_scope("s1", use_resource=True):
        return _relu_matmuls(x) * scale[0], label


def _second_stage(x, label):
    with v1.variable_scope("s2", use_resource=True):
        return _relu_matmuls(x), label


def _loss_stage(x, label):
    logits = tf.reduce_mean(x, axis=[1])
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
    )


@pytest.mark.follows("testPipelineThreeInput")
@IO_TILES
def test_pipeline_three_input(number_of_io_tiles):
    compare_to_cpu(
        stages=[_scaled_stage, _second_stage, _loss_stage],
        inputs_fn=placeholder_inputs(),
        input_values=[],
        repeat_count=2,
        gradient_accumulation_count=24,
        dataset_fn=_three_input_dataset,
        optimizer_fn=lambda: v1.train.MomentumOptimizer(0.01, 0.98),
        schedule=SCHEDULE,
        number_of_io_tiles=number_of_io_tiles,
    )
