"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/pipelining_recomputation_test.py`.

Interleaved training pipelines with recomputation allowed (`allow_recompute`), compared
with the same model trained on the CPU with accumulated gradients
(`pipeline_comparison`): convolutions and dense layers, a small ResNet, a wide embedding,
a stage holding a stateful op (a print), and stages without variables (no backward
stage). Recomputing activations changes no value, which is what these comparisons
check. And weights shared by two stages on one IPU, which the Interleaved schedule
refuses for training (NotImplementedError, the original's message). The original's
testPipelineCompare6 runs a precompiled Poplar custom operation
(libpipelining_stateful_op.so, Poplar codelets), which only the IPU runs.
"""

from __future__ import annotations

import pipeline_scenarios as scenarios
import pytest
from pipeline_comparison import Schedule, compare_to_cpu

SCHEDULE = Schedule.Interleaved


def _compare(model):
    compare_to_cpu(schedule=SCHEDULE, recomp=True, **model)


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
    _compare(scenarios.compare5())


@pytest.mark.follows("testPipelineCompareSharedWeights")
def test_pipeline_compare_shared_weights():
    with pytest.raises(NotImplementedError, match="The pipelining schedule"):
        _compare(scenarios.int8_shared_weights())
