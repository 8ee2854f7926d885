"""Shared by the pipeline API conformance modules (functional, model, sequential
pipeline_api_test): the original's checks of a bad assignment of a two-input model whose
six layer invocations (3 layers, each called twice) it numbers, and of bad pipelining
options, with the original's messages."""

from __future__ import annotations

import numpy as np
import pytest


def two_inputs(rows=6):
    return [np.ones((rows, 32), np.int32), np.ones((rows, 32), np.int32)]


def check_invalid_number_of_assignments(m) -> None:
    assignments = m.get_pipeline_stage_assignment()
    assignments.pop()
    with pytest.raises(
        ValueError,
        match=r"The length of the provided `pipeline_stage_assignment` \(5\) does not match "
        r"the number of layers in the graph \(6\).",
    ):
        m.set_pipeline_stage_assignment(assignments)


def check_invalid_assignment_class(m, record_class: str) -> None:
    assignments = m.get_pipeline_stage_assignment()
    assignments[0] = None
    with pytest.raises(
        ValueError,
        match=r"The pipeline stage assignment for layer .* in .* must be an instance of "
        rf"`{record_class}`.",
    ):
        m.set_pipeline_stage_assignment(assignments)


def check_missing_assignment(m) -> None:
    assignments = m.get_pipeline_stage_assignment()
    for i, assignment in enumerate(assignments[:-1]):
        assignment.pipeline_stage = i
    with pytest.raises(
        ValueError,
        match=r"Layer dense.* with node_index 0 has not been assigned a pipeline stage in "
        r"`pipeline_stage_assignment`.",
    ):
        m.set_pipeline_stage_assignment(assignments)


def check_assignments_out_of_order(m) -> None:
    assignments = m.get_pipeline_stage_assignment()
    for i, assignment in enumerate(assignments):
        assignment.pipeline_stage = i
    assignments[0], assignments[1] = assignments[1], assignments[0]
    with pytest.raises(
        ValueError,
        match="The order of `pipeline_stage_assignment` does not match the post-order "
        "generated from the graph",
    ):
        m.set_pipeline_stage_assignment(assignments)


def check_empty_stages(m) -> None:
    """Stages 0, 2, ..., 10: predict refuses the stages with no layer."""
    assignments = m.get_pipeline_stage_assignment()
    for i, assignment in enumerate(assignments):
        assignment.pipeline_stage = i * 2
    m.set_pipeline_stage_assignment(assignments)
    m.set_pipelining_options(device_mapping=[0] * 6, gradient_accumulation_steps_per_replica=12)
    with pytest.raises(
        RuntimeError,
        match=r"All stages in a pipeline must have at lease one layer assigned to them. The "
        r"highest stage with an assignment is stage 10, however the preceeding stages "
        r"\[1, 3, 5, 7, 9\] had no assignments.",
    ):
        m.predict(two_inputs(), batch_size=1)


def check_dependency_on_later_stage(m) -> None:
    assignments = m.get_pipeline_stage_assignment()
    for i, assignment in enumerate(assignments):
        assignment.pipeline_stage = i - 1
    assignments[0].pipeline_stage = assignments[-1].pipeline_stage
    with pytest.raises(
        ValueError,
        match=r"Layer dense.* in pipeline stage 1 has a dependency from a pipeline stage",
    ):
        m.set_pipeline_stage_assignment(assignments)


def check_non_integer_device_mapping(m) -> None:
    with pytest.raises(ValueError, match="Expected `device_mapping` to be a list of integers"):
        m.set_pipelining_options(device_mapping=[0.0] * 10)


def check_invalid_keys(m) -> None:
    with pytest.raises(
        ValueError,
        match="Found `gradient_accumulation_count` key in `pipelining_kwargs`. Set the "
        "`gradient_accumulation_steps_per_replica` argument to `set_pipelining_options` "
        "instead.",
    ):
        m.set_pipelining_options(gradient_accumulation_count=10)
    with pytest.raises(
        ValueError,
        match="Found `repeat_count` key in `pipelining_kwargs`. This argument is automatically "
        "set by Keras",
    ):
        m.set_pipelining_options(repeat_count=10)
    with pytest.raises(
        ValueError,
        match="Found `batch_serialization_iterations` key in `pipelining_kwargs`. This "
        "argument is not compatible with Keras",
    ):
        m.set_pipelining_options(batch_serialization_iterations=10)


def check_negative_steps(m) -> None:
    with pytest.raises(
        ValueError,
        match="Expected `gradient_accumulation_steps_per_replica` to be a positive integer, "
        "but got -1 instead",
    ):
        m.set_pipelining_options(gradient_accumulation_steps_per_replica=-1)


def summary_row(first: str, second: str, third: str) -> str:
    """A row of the original's summary of 85 columns (0.4, 0.8, 1.0 of the width)."""
    return first.ljust(34) + second.ljust(34) + third.ljust(17)
