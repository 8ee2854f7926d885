"""Conformance: graphcore/keras `keras/ipu/extensions/sequential_pipeline_api_test.py`.

The pipeline stage assignment of a Sequential model: the default (no stages), set from
ints or from records, reset; adding or popping a layer invalidates it; the original's
errors for bad assignments and bad pipelining options; the assignment and the pipelining
options survive saving and loading; the summary's layout.
"""

from __future__ import annotations

import os

import numpy as np
import pipeline_api_checks as checks
import pytest
import tf_keras as keras
from tensorflow.python.ipu import gradient_accumulation as ga
from tf_keras import layers
from tf_keras.ipu import extensions


@pytest.fixture
def scope(strategy_on):
    with strategy_on(1).scope():
        yield


def _simple_model():
    return keras.Sequential([layers.Dense(16) for _ in range(10)])


def _check_records(model, assignments):
    record = extensions.sequential_extensions.SequentialLayerPipelineStageAssignment
    assert all(isinstance(a, record) for a in assignments)
    assert [a.layer for a in assignments] == model.layers


def _default_records(model):
    record = extensions.sequential_extensions.SequentialLayerPipelineStageAssignment
    return [record(layer, i) for i, layer in enumerate(model.layers)]


@pytest.mark.follows("testGetSetReset")
def test_get_set_reset(scope):
    m = _simple_model()
    assignments = m.get_pipeline_stage_assignment()
    assert not m._pipeline_stage_assignment_valid
    _check_records(m, assignments)
    assert all(a.pipeline_stage is None for a in assignments)

    m.set_pipeline_stage_assignment(list(range(10)))
    assert m._pipeline_stage_assignment_valid
    assignments = m.get_pipeline_stage_assignment()
    _check_records(m, assignments)
    assert [a.pipeline_stage for a in assignments] == list(range(10))

    for i, assignment in enumerate(assignments):
        assignment.pipeline_stage = 0 if i < 5 else 1
    m.set_pipeline_stage_assignment(assignments)
    assignments = m.get_pipeline_stage_assignment()
    _check_records(m, assignments)
    assert [a.pipeline_stage for a in assignments] == [0] * 5 + [1] * 5

    m.reset_pipeline_stage_assignment()
    assert not m._pipeline_stage_assignment_valid
    assert all(a.pipeline_stage is None for a in m.get_pipeline_stage_assignment())

    m.set_pipeline_stage_assignment(list(range(10)))
    m.add(layers.Dense(1))
    assert not m._pipeline_stage_assignment_valid
    m.set_pipeline_stage_assignment(list(range(11)))
    assert m._pipeline_stage_assignment_valid
    m.pop()
    assert not m._pipeline_stage_assignment_valid
    m.set_pipeline_stage_assignment(list(range(10)))
    assert m._pipeline_stage_assignment_valid

    with pytest.raises(ValueError, match="All elements of `pipeline_stage_assignment`"):
        m.set_pipeline_stage_assignment([0.0] * 10)
    with pytest.raises(
        ValueError,
        match=r"The length of the provided `pipeline_stage_assignment` \(8\) does not match "
        r"the number of layers in the graph \(10\).",
    ):
        m.set_pipeline_stage_assignment(list(range(8)))

    m = _simple_model()
    assignments = _default_records(m)
    assignments[0], assignments[1] = assignments[1], assignments[0]
    with pytest.raises(
        ValueError,
        match=r"The provided assignment at index 0 `pipeline_stage_assignment` is for layer "
        r"dense.*, but the layer in the Sequential model at index 0 is dense.*",
    ):
        m.set_pipeline_stage_assignment(assignments)

    m = _simple_model()
    assignments = _default_records(m)
    assignments[0].pipeline_stage = 1
    with pytest.raises(
        ValueError,
        match="The first layer in a pipelined sequential model needs to be assigned to the "
        "0th pipeline stage, however it was assigned to 1.",
    ):
        m.set_pipeline_stage_assignment(assignments)

    m = _simple_model()
    assignments = _default_records(m)
    assignments[-1].pipeline_stage = 0
    with pytest.raises(
        ValueError,
        match=r"Layer dense.* has been assigned to pipeline stage 0, however the previous layer "
        r"in the Sequential model was assigned to pipeline stage 8. A layer in a Sequential "
        r"model can only be assigned to the same pipeline stage as the previous layer or to "
        r"the next pipeline stage.",
    ):
        m.set_pipeline_stage_assignment(assignments)


def _saved_and_loaded(model, tmp_path):
    path = os.path.join(tmp_path, "model")
    model.save(path)
    return keras.models.load_model(path)


@pytest.mark.follows("testSaveRestore")
def test_save_restore(scope, tmp_path):
    m = _simple_model()
    m.build((4, 1))
    m.set_pipeline_stage_assignment(list(range(10)))
    x = np.random.default_rng(0).normal(size=(4, 1)).astype(np.float32)
    expected = m(x).numpy()
    m = _saved_and_loaded(m, tmp_path)
    assert m._pipeline_stage_assignment_valid
    assignments = m.get_pipeline_stage_assignment()
    _check_records(m, assignments)
    assert [a.pipeline_stage for a in assignments] == list(range(10))
    np.testing.assert_allclose(m(x).numpy(), expected, rtol=1e-6)


@pytest.mark.follows("testSetPipeliningOptions")
def test_set_pipelining_options(scope, tmp_path):
    m = _simple_model()
    m.set_pipeline_stage_assignment(list(range(10)))
    checks.check_negative_steps(m)
    checks.check_non_integer_device_mapping(m)
    checks.check_invalid_keys(m)

    m.set_pipelining_options(
        gradient_accumulation_steps_per_replica=10,
        device_mapping=[4, 3, 2, 1, 0],
        accumulate_outfeed=True,
        gradient_accumulation_reduction_method="mean",
    )
    m.build((4, 1))
    m = _saved_and_loaded(m, tmp_path)
    assert m._pipeline_stage_assignment_valid
    assignments = m.get_pipeline_stage_assignment()
    _check_records(m, assignments)
    assert [a.pipeline_stage for a in assignments] == list(range(10))
    assert m._pipelining_gradient_accumulation_steps_per_replica == 10
    assert m._pipelining_accumulate_outfeed is True
    assert m._gradient_accumulation_reduction_method == ga.GradientAccumulationReductionMethod.MEAN


@pytest.mark.follows("testPrintPipelineStageSummary")
def test_print_pipeline_stage_summary(scope):
    m = keras.Sequential([layers.Flatten(), layers.Dense(4)])
    strings = []
    m.print_pipeline_stage_assignment_summary(line_length=65, print_fn=strings.append)
    name = m.name
    flatten, dense = (layer.name for layer in m.layers)
    assert strings == [
        f'Model: "{name}"',
        "_" * 65,
        "Layer (type)                    Pipeline Stage                   ",
        "=" * 65,
        f"{flatten} (Flatten)".ljust(32) + "None".ljust(33),
        "_" * 65,
        f"{dense} (Dense)".ljust(32) + "None".ljust(33),
        "=" * 65,
    ]
