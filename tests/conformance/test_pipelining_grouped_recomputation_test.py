"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/pipelining_grouped_recomputation_test.py`.

Grouped training pipelines with recomputation allowed, compared with the same model
trained on the CPU with accumulated gradients (`pipeline_comparison`): the models of
the other schedules' files (`pipeline_scenarios`), weights shared between stages (with
the RecomputeAndBackpropagateInterleaved mode), an input used unmodified by the loss,
recomputation checkpoints (also in the final stage) and a stage taking three inputs.
The original runs most of them with and without I/O tiles (`number_of_io_tiles`), which
place data, not values: here once. Left out: testPipelineCompare6 runs a precompiled
Poplar custom operation; the final-stage checkpoint's count of recomputed multiplies is a
Poplar profile check (its losses are compared here). testPipelineCompareRecomputeDropout
compares with the sharded model on the IPU; a seeded IPU dropout draws the same mask
wherever it runs, so here its stages run on the CPU as the reference.
"""

from __future__ import annotations

import numpy as np
import pipeline_scenarios as scenarios
import pytest
import tensorflow as tf
from pipeline_comparison import Schedule, compare_to_cpu, increasing, placeholder_inputs
from tensorflow.python import ipu

v1 = tf.compat.v1
RecomputationMode = ipu.pipelining_ops.RecomputationMode


def _compare(model, **options):
    compare_to_cpu(schedule=Schedule.Grouped, recomp=True, **model, **options)


@pytest.mark.follows("testPipelineCompare1")
def test_pipeline_compare1():
    _compare(scenarios.compare1())


@pytest.mark.follows("testPipelineCompare2")
def test_pipeline_compare2():
    _compare(scenarios.compare2(repeat_count=1, classes=100))


@pytest.mark.follows("testPipelineCompare3")
def test_pipeline_compare3():
    _compare(scenarios.compare3(repeat_count=1, width=1216))


@pytest.mark.follows("testPipelineCompare4")
def test_pipeline_compare4():
    _compare(scenarios.compare1(print_in_stage2=True))


@pytest.mark.follows("testPipelineCompare5")
def test_pipeline_compare5():
    _compare(scenarios.single_pixel_conv(repeat_count=1))


@pytest.mark.follows("testPipelineCompare7")
def test_pipeline_compare7():
    _compare(scenarios.compare5(scale=20.0))


def _labelled_4x4(label_fn=lambda value: value[0][0] % 4, count=7):
    dataset = increasing(count, [4, 4])
    dataset = dataset.map(lambda value: (value, tf.cast(label_fn(value), np.int32)))
    return dataset.batch(2, drop_remainder=True)


def _weight(name, shape=(4, 4)):
    return v1.get_variable(
        name, shape=list(shape), dtype=np.float32, initializer=v1.ones_initializer()
    )


def _softmax_loss(logits, label):
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
    )


def _model(stages, optimizer_fn, dataset_fn=_labelled_4x4):
    return dict(
        stages=stages,
        inputs_fn=placeholder_inputs(),
        input_values=[],
        repeat_count=2,
        # The fewest iterations the grouped schedule takes: its forward and backward stages.
        gradient_accumulation_count=2 * len(stages),
        dataset_fn=dataset_fn,
        optimizer_fn=optimizer_fn,
    )


def _momentum():
    return v1.train.MomentumOptimizer(0.01, 0.98)


@pytest.mark.follows("testPipelineCompareSharedWeights")
def test_pipeline_compare_shared_weights():
    def stage1(x, label):
        with v1.variable_scope("vs", use_resource=True):
            x = tf.matmul(x, _weight("w0"))
            return tf.pad(x, [[0, 0], [0, 0], [1, 1]]), label

    def stage2(x, label):
        with v1.variable_scope("vs2", use_resource=True):
            x = tf.matmul(x, _weight("w1", (6, 4)))
            return tf.matmul(x, _weight("w2")), label

    def stage4(x, label):
        with v1.variable_scope("vs", use_resource=True, reuse=True):
            x = tf.matmul(x, _weight("w0"))
            return _softmax_loss(tf.reduce_mean(x, axis=[1]), label)

    _compare(
        _model([stage1, stage2, lambda x, label: (x + 1, label), stage4], _momentum),
        recomputation_mode=RecomputationMode.RecomputeAndBackpropagateInterleaved,
        device_mapping=[0, 1, 2, 0],
    )


@pytest.mark.follows("testPipelineCompareSharedWeights2")
def test_pipeline_compare_shared_weights2():
    def stage1(x, label):
        with v1.variable_scope("vs", use_resource=True):
            return tf.matmul(x, _weight("w0")), label

    def stage2(x, label):
        ipu.internal_ops.print_tensor(x)
        return x, label

    def stage3(x, label):
        with v1.variable_scope("vs", use_resource=True, reuse=True):
            return tf.matmul(x, _weight("w0")), label

    def stage4(x, label):
        return _softmax_loss(tf.reduce_sum(x, axis=[1]), label)

    _compare(_model([stage1, stage2, stage3, stage4], _momentum), device_mapping=[0, 1, 0, 2])


@pytest.mark.follows("testUnmodifiedInput")
def test_unmodified_input():
    def stage1(x, label):
        with v1.variable_scope("s1", use_resource=True):
            return _weight("w") + x, label

    def stage2(x, label):
        x = tf.reduce_sum(x, axis=[2])
        with v1.variable_scope("s2", use_resource=True):
            return tf.matmul(x, _weight("w", (4, 8))), label

    _compare(
        _model(
            [stage1, stage2, _softmax_loss],
            lambda: v1.train.GradientDescentOptimizer(0.1),
            dataset_fn=lambda: _labelled_4x4(lambda value: value[0][0], count=8),
        )
    )


def _two_matmul_stage(x, checkpoint):
    x = tf.nn.relu(tf.matmul(x, _weight("w0")))
    if checkpoint:
        x = ipu.pipelining_ops.recomputation_checkpoint(x)
    return tf.nn.relu(tf.matmul(x, _weight("w1")))


def _mean_logits_loss(x, label):
    return _softmax_loss(tf.reduce_mean(x, axis=[1]), label)


@pytest.mark.follows("testPipelineRecomputationCheckpoint")
def test_pipeline_recomputation_checkpoint():
    def stage(name):
        def run(x, label):
            with v1.variable_scope(name, use_resource=True):
                return _two_matmul_stage(x, checkpoint=True), label

        return run

    _compare(
        _model([stage("s1"), stage("s2"), _mean_logits_loss], _momentum),
        recomputation_mode=RecomputationMode.RecomputeAndBackpropagateInterleaved,
    )


@pytest.mark.follows("testPipelineRecomputationCheckpointInFinalStage")
def test_pipeline_recomputation_checkpoint_in_final_stage():
    def dataset_fn():
        dataset = increasing(7, [4, 4]).map(lambda value: (value, value))
        return dataset.batch(2, drop_remainder=True)

    def stage3(x, label):
        with v1.variable_scope("s3", use_resource=True):
            x = x * _weight("w0", (2, 4, 4))
            x = x * _weight("w1", (2, 4, 4))
            x = ipu.pipelining_ops.recomputation_checkpoint(x)
            x = x * _weight("w2", (2, 4, 4))
            x = x * _weight("w3", (2, 4, 4))
        return x + label

    def passing(x, label):
        return x, label

    # The loss is not a scalar: the pipeline outfeeds, and the CPU differentiates, its sum.
    _compare(
        _model([passing, passing, stage3], _momentum, dataset_fn=dataset_fn),
        recomputation_mode=RecomputationMode.RecomputeAndBackpropagateInterleaved,
    )


@pytest.mark.follows("testPipelineRecomputationThreeInput")
def test_pipeline_recomputation_three_input():
    def dataset_fn():
        dataset = increasing(7, [4, 4])
        dataset = dataset.map(
            lambda value: (value, tf.cast(value[0][0] % 4, np.int32), value[1][1])
        )
        return dataset.batch(2, drop_remainder=True)

    def stage1(x, label, scale):
        with v1.variable_scope("s1", use_resource=True):
            return _two_matmul_stage(x, checkpoint=False) * scale[0], label

    def stage2(x, label):
        with v1.variable_scope("s2", use_resource=True):
            return _two_matmul_stage(x, checkpoint=False), label

    _compare(_model([stage1, stage2, _mean_logits_loss], _momentum, dataset_fn=dataset_fn))


@pytest.mark.follows("testPipelineCompareRecomputeDropout")
def test_pipeline_compare_recompute_dropout():
    # The original compares with the model sharded on the IPU, as its dropout masks come
    # from the device. A seeded IPU dropout draws the same mask wherever it runs, so here
    # the reference runs the same stages (the same dropout op) one after the other on the
    # CPU: the recomputed forward pass of the pipeline must reuse the forward's masks.
    def stage(x, name):
        with v1.variable_scope(name, use_resource=True):
            weight = _weight("w")
        return ipu.rand_ops.dropout(tf.matmul(x, weight), seed=[10, 10])

    def stage1(x, label):
        return stage(x, "s1"), label

    def stage2(x, label):
        return stage(x, "s2"), label

    def stage3(x, label):
        logits = tf.reduce_sum(stage(x, "s3"), axis=[1])
        return _softmax_loss(logits, label)

    model = _model([stage1, stage2, stage3], _momentum)
    model["gradient_accumulation_count"] = 24
    _compare(model)
