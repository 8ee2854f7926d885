"""Conformance: graphcore/keras `keras/ipu/extensions/functional_pipeline_api_test.py`.

The pipeline stage assignment of a functional model, one record per layer invocation
(node): the default, set, reset; the original's errors for a wrong number of records, a
record of the wrong class, a missing stage, records out of execution order, a stage with
no layer (at predict), a layer taking the output of a later stage; stages from
`PipelineStage` scopes (on a layer's construction and on its calls; a model with some
invocations in no scope is refused when it is made); saving and loading the assignment and
the pipelining options; the summary's layout.
"""

from __future__ import annotations

import os

import numpy as np
import pipeline_api_checks as checks
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python.ipu import gradient_accumulation as ga
from tf_keras import layers
from tf_keras.ipu import extensions

PipelineStage = extensions.pipeline_stage_assignment.PipelineStage


@pytest.fixture
def scope(strategy_on):
    with strategy_on(1).scope():
        yield


def _simple_model():
    d1 = layers.Input(32)
    d2 = layers.Input(32)
    x1 = layers.Dense(4)(layers.Flatten()(d1))
    x2 = layers.Dense(4)(layers.Flatten()(d2))
    shared = layers.Dense(8)
    return keras.Model((d1, d2), (shared(x1), shared(x2)))


def _model_with_scopes():
    d1 = layers.Input(32)
    d2 = layers.Input(32)
    with PipelineStage(0):
        f1 = layers.Flatten()(d1)
    with PipelineStage(1):
        f2 = layers.Flatten()(d2)
    with PipelineStage(2):
        x1 = layers.Dense(4)(f1)
    with PipelineStage(3):
        x2 = layers.Dense(4)(f2)
    with PipelineStage(4):
        shared = layers.Dense(8)  # its calls' stage unless a call has a scope of its own
    o1 = shared(x1)
    with PipelineStage(5):
        o2 = shared(x2)
    return keras.Model((d1, d2), (o1, o2))


def _check_records(assignments):
    record = extensions.pipeline_stage_assignment.FunctionalLayerPipelineStageAssignment
    assert all(isinstance(a, record) for a in assignments)


def _numbered(model):
    """The default records, the i-th in stage i; and each node's stage."""
    assignments = model.get_pipeline_stage_assignment()
    stage_of_node = {}
    for i, assignment in enumerate(assignments):
        assignment.pipeline_stage = i
        stage_of_node[id(assignment.layer._inbound_nodes[assignment.node_index])] = i
    return assignments, stage_of_node


@pytest.mark.follows("testGetPipelineStageAssignmentDefault")
def test_get_pipeline_stage_assignment_default(scope):
    assignments = _simple_model().get_pipeline_stage_assignment()
    assert len(assignments) == 6  # 3 layers called twice
    _check_records(assignments)
    assert all(a.pipeline_stage is None for a in assignments)


@pytest.mark.follows("testSetPipelineStageAssignment")
def test_set_pipeline_stage_assignment(scope):
    m = _simple_model()
    assignments, stage_of_node = _numbered(m)
    m.set_pipeline_stage_assignment(assignments)
    assignments = m.get_pipeline_stage_assignment()
    _check_records(assignments)
    for a in assignments:
        assert a.pipeline_stage == stage_of_node[id(a.layer._inbound_nodes[a.node_index])]


@pytest.mark.follows("testResetPipelineStageAssignment")
def test_reset_pipeline_stage_assignment(scope):
    m = _simple_model()
    m.set_pipeline_stage_assignment(_numbered(m)[0])
    assert m._is_pipelined()
    m.reset_pipeline_stage_assignment()
    assignments = m.get_pipeline_stage_assignment()
    _check_records(assignments)
    assert all(a.pipeline_stage is None for a in assignments)
    assert not m._is_pipelined()


@pytest.mark.follows("testSetPipelineStageAssignmentWithInvalidNumberOfAssignments")
def test_invalid_number_of_assignments(scope):
    checks.check_invalid_number_of_assignments(_simple_model())


@pytest.mark.follows("testSetPipelineStageAssignmentWithInvalidAssignmentClass")
def test_invalid_assignment_class(scope):
    checks.check_invalid_assignment_class(_simple_model(), "FunctionalLayerPipelineStageAssignment")


@pytest.mark.follows("testSetPipelineStageAssignmentWithMissingAssignment")
def test_missing_assignment(scope):
    checks.check_missing_assignment(_simple_model())


@pytest.mark.follows("testSetPipelineStageAssignmentWithAssignmentForNonExistantNode")
def test_assignments_out_of_order(scope):
    checks.check_assignments_out_of_order(_simple_model())


@pytest.mark.follows("testSetPipelineStageAssignmentWithEmptyStages")
def test_empty_stages(scope):
    checks.check_empty_stages(_simple_model())


@pytest.mark.follows("testSetPipelineStageAssignmentWithDependencyOnLaterStage")
def test_dependency_on_later_stage(scope):
    checks.check_dependency_on_later_stage(_simple_model())


@pytest.mark.follows("testPipelineStageAssignmentWithScopes")
def test_assignment_with_scopes(scope):
    m = _model_with_scopes()
    m.compile(steps_per_execution=6)
    m.set_pipelining_options(device_mapping=[0] * 6)
    predictions = m.predict(checks.two_inputs(), batch_size=1)
    assert m._is_pipelined()
    stages = {
        (m.layers.index(a.layer), a.node_index): a.pipeline_stage
        for a in m.get_pipeline_stage_assignment()
    }
    assert stages == {(2, 0): 0, (3, 0): 1, (4, 0): 2, (5, 0): 3, (6, 0): 4, (6, 1): 5}
    # The stages change where layers run, not what they compute.
    expected = m(checks.two_inputs(), training=False)
    for ours, theirs in zip(predictions, expected, strict=True):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.follows("testRunModelWithPartialPipelineStageAssignments")
def test_partial_assignments(scope):
    d1 = layers.Input(32)
    d2 = layers.Input(32)
    with PipelineStage(0):
        f1 = layers.Flatten()(d1)
    f2 = layers.Flatten()(d2)
    with pytest.raises(
        ValueError,
        match=r"All layers of a pipelined model must have an associated pipeline stage. "
        r"However, .* has not been assigned to one.",
    ):
        keras.Model((d1, d2), (layers.Dense(4)(f1), layers.Dense(4)(f2)))


_STAGES = {(2, 0): 0, (3, 0): 1, (4, 0): 2, (5, 0): 3, (6, 0): 4, (6, 1): 5}


def _stages_by_layer_index(model):
    return {
        (model.layers.index(a.layer), a.node_index): a.pipeline_stage
        for a in model.get_pipeline_stage_assignment()
    }


@pytest.mark.follows("testSaveRestore")
def test_save_restore(scope, tmp_path):
    m = _simple_model()
    assignments = m.get_pipeline_stage_assignment()
    for a in assignments:
        a.pipeline_stage = _STAGES[(m.layers.index(a.layer), a.node_index)]
    m.set_pipeline_stage_assignment(assignments)
    assert _stages_by_layer_index(m) == _STAGES
    path = os.path.join(tmp_path, "model")
    m.save(path)
    m = keras.models.load_model(path)
    assert m._is_pipelined()
    assert _stages_by_layer_index(m) == _STAGES


@pytest.mark.follows("testSetPipeliningOptionsWithNonIntegerTypeDeviceMapping")
def test_non_integer_device_mapping(scope):
    checks.check_non_integer_device_mapping(_simple_model())


@pytest.mark.follows("testSetPipeliningOptionsWithInvalidKeys")
def test_invalid_keys(scope):
    checks.check_invalid_keys(_simple_model())


@pytest.mark.follows("testSaveAndRestorePipeliningOptions")
def test_save_and_restore_pipelining_options(scope, tmp_path):
    m = _simple_model()
    m.set_pipelining_options(
        gradient_accumulation_steps_per_replica=10,
        device_mapping=[4, 3, 2, 1, 0],
        accumulate_outfeed=True,
        gradient_accumulation_reduction_method="mean",
    )
    path = os.path.join(tmp_path, "model")
    m.save(path)
    m = keras.models.load_model(path)
    assert m._pipelining_gradient_accumulation_steps_per_replica == 10
    assert m._pipelining_device_mapping == [4, 3, 2, 1, 0]
    assert m._pipelining_accumulate_outfeed is True
    assert m._gradient_accumulation_reduction_method == ga.GradientAccumulationReductionMethod.MEAN


@pytest.mark.follows("testPrintPipelineStageSummary")
def test_print_pipeline_stage_summary(scope):
    d1 = layers.Input(32, name="input_a")
    d2 = layers.Input(32, name="input_b")
    f1 = layers.Flatten(name="flatten")(d1)
    f2 = layers.Flatten(name="flatten_1")(d2)
    c1 = layers.Concatenate(name="concatenate")([f1, f2])
    x1 = layers.Dense(4, name="dense")(c1)
    m = keras.Model((d1, d2), tf.multiply(1.0, x1), name="model")
    strings = []
    m.print_pipeline_stage_assignment_summary(line_length=85, print_fn=strings.append)

    row = checks.summary_row

    assert strings == [
        'Model: "model"',
        "_" * 85,
        row("Layer (type) (node index)", "Input Layers", "Pipeline Stage"),
        "=" * 85,
        row("flatten (Flatten) (0)", "input_a", "None"),
        "_" * 85,
        row("flatten_1 (Flatten) (0)", "input_b", "None"),
        "_" * 85,
        row("concatenate (Concatenate) (0)", "flatten", "None"),
        row("", "flatten_1", ""),
        "_" * 85,
        row("dense (Dense) (0)", "concatenate", "None"),
        "_" * 85,
        row("tf.math.multiply (TFOpLambda) (0)", "dense", "None"),
        "=" * 85,
    ]
