"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/pipelining_sequential_recomputation_test.py`.

Sequential training pipelines with recomputation allowed, compared with the same model
trained on the CPU with accumulated gradients (`pipeline_comparison`): convolutions and
dense layers, a small ResNet, a wide embedding, a stage holding a stateful op (a print),
and single-pixel convolutions. The original's testDistributedBatchNorm only checks the
profile's compute sets (a Poplar report) for recomputed batch-norm statistics.
"""

from __future__ import annotations

import pipeline_scenarios as scenarios
import pytest
from pipeline_comparison import Schedule, compare_to_cpu


def _compare(model):
    compare_to_cpu(schedule=Schedule.Sequential, recomp=True, **model)


@pytest.mark.follows("testPipelineCompare1")
def test_pipeline_compare1():
    _compare(scenarios.compare1())


@pytest.mark.follows("testPipelineCompare2")
def test_pipeline_compare2():
    _compare(scenarios.compare2())


@pytest.mark.follows("testPipelineCompare3")
def test_pipeline_compare3():
    _compare(scenarios.compare3(width=1216))


@pytest.mark.follows("testPipelineCompare4")
def test_pipeline_compare4():
    _compare(scenarios.compare1(print_in_stage2=True))


@pytest.mark.follows("testPipelineCompare5")
def test_pipeline_compare5():
    _compare(scenarios.single_pixel_conv())
