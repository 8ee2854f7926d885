"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/pipelining_batch_serial_sequential_test.py`.

Batch serialization's refusals (stages on more than one IPU, a schedule other than
Sequential: NotImplementedError with the original's messages), and Sequential training
pipelines compared with the same model trained on the CPU with accumulated gradients
(`pipeline_comparison`; the models are in `pipeline_scenarios`), with each
gradient-accumulation reduction method where the original tries them all.
"""

from __future__ import annotations

import pipeline_scenarios as scenarios
import pytest
from pipeline_comparison import GA, Schedule, compare_to_cpu

SCHEDULE = Schedule.Sequential
REDUCTIONS = pytest.mark.parametrize("reduction_method", list(GA), ids=lambda m: m.name)


@pytest.mark.follows("testPipelineInvalidDeviceMapping")
@pytest.mark.parametrize(
    "schedule, device_mapping, message",
    [
        (
            Schedule.Sequential,
            [0, 1, 0],
            "When using batch serialization, all the pipeline stages need to be mapped to a "
            "single IPU.",
        ),
        (
            Schedule.Grouped,
            [0, 0, 0],
            "Batch serialization is only supported with the `Sequential` schedule",
        ),
    ],
    ids=["two-ipus", "grouped"],
)
def test_pipeline_invalid_device_mapping(tf1_graph, schedule, device_mapping, message):
    with pytest.raises(NotImplementedError, match=message):
        scenarios.build_with_device_mapping(
            schedule,
            device_mapping,
            batch_serialization_iterations=4,
            reduction_method=GA.SUM,
        )


@pytest.mark.follows("testPipelineCompare1")
@REDUCTIONS
def test_pipeline_compare1(reduction_method):
    compare_to_cpu(schedule=SCHEDULE, reduction_method=reduction_method, **scenarios.compare1())


@pytest.mark.follows("testPipelineCompare2")
@REDUCTIONS
def test_pipeline_compare2(reduction_method):
    compare_to_cpu(schedule=SCHEDULE, reduction_method=reduction_method, **scenarios.compare2())


@pytest.mark.follows("testPipelineCompare3")
def test_pipeline_compare3():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.compare3(width=1216))


@pytest.mark.follows("testPipelineCompareSharedWeights")
def test_pipeline_compare_shared_weights():
    model = scenarios.shared_weights(1)
    model["device_mapping"] = [0, 1, 2, 3, 0]
    compare_to_cpu(schedule=SCHEDULE, **model)


@pytest.mark.follows("testPipelineCompareSharedWeights2")
def test_pipeline_compare_shared_weights2():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.shared_weights(2))


@pytest.mark.follows("testPipelineCompareSharedWeights3")
def test_pipeline_compare_shared_weights3():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.shared_weights(3))
