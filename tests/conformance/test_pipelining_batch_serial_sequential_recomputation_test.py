"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/pipelining_batch_serial_sequential_recomputation_test.py`.

Sequential training pipelines with recomputation allowed (`allow_recompute`), compared
with the same model trained on the CPU with accumulated gradients
(`pipeline_comparison`; the models are in `pipeline_scenarios`): the convolution and
dense model, a ResNet-like one, an embedding table, a stage with a stateful op (a
print, which cannot be recomputed), and single-pixel images. The original's tile memory
figures are a Poplar report, and its `compare_pipeline_to_sharding` (testPipelineCompare2)
real sharding: here everything is compared with the CPU.
"""

from __future__ import annotations

import pipeline_scenarios as scenarios
import pytest
from pipeline_comparison import Schedule, compare_to_cpu, increasing

SCHEDULE = Schedule.Sequential


@pytest.mark.follows("testPipelineCompare1")
def test_pipeline_compare1():
    model = scenarios.compare1(gradient_accumulation_count=16)
    compare_to_cpu(schedule=SCHEDULE, recomp=True, **model)


@pytest.mark.slow
@pytest.mark.follows("testPipelineCompare2")
def test_pipeline_compare2():
    compare_to_cpu(schedule=SCHEDULE, recomp=True, **scenarios.compare2())


@pytest.mark.follows("testPipelineCompare3")
def test_pipeline_compare3():
    model = scenarios.compare3(gradient_accumulation_count=16, width=1216)
    compare_to_cpu(schedule=SCHEDULE, recomp=True, **model)


@pytest.mark.follows("testPipelineCompare4")
def test_pipeline_compare4():
    model = scenarios.compare1(gradient_accumulation_count=16, print_in_stage2=True)
    compare_to_cpu(schedule=SCHEDULE, recomp=True, **model)


@pytest.mark.follows("testPipelineCompare5")
def test_pipeline_compare5():
    model = scenarios.single_pixel_conv(gradient_accumulation_count=8)

    def dataset_fn():
        # This file's images are scaled to [0, 1).
        dataset = increasing(128, [1, 1, 1]).batch(1, drop_remainder=True)
        return dataset.map(lambda value: (value / 128, value[0][0][0][0]))

    model["dataset_fn"] = dataset_fn
    compare_to_cpu(schedule=SCHEDULE, recomp=True, **model)
