"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/pipelining_sequential_test.py`.

TF1 pipelines with the Sequential schedule: pipelines that leave tensors without an
outfeed, invalid device mappings, a single stage, a stage capturing a placeholder (all
refused as the original); a 3-stage inference pipeline (with device mappings, and
infeeds given as keyword arguments) whose outfed losses are the original's numbers
(the original also checks in the profile which IPU ran each stage, left out: a Poplar
report); duplicated stage inputs and outputs; and training pipelines (convolutions and
dense layers, a small ResNet, an embedding, weights shared between stages) compared with
the same model trained on the CPU with accumulated gradients (`pipeline_comparison`),
with fewer accumulated batches than the original to keep them short.
"""

from __future__ import annotations

import pipeline_scenarios as scenarios
import pytest
from pipeline_comparison import Schedule, compare_to_cpu

SCHEDULE = Schedule.Sequential


@pytest.mark.follows("testPipelineNoOutfeedInference")
def test_pipeline_no_outfeed_inference(tf1_graph):
    scenarios.check_no_outfeed_refused(SCHEDULE, training=False)


@pytest.mark.follows("testPipelineNoOutfeedWithOutputsTraining")
def test_pipeline_no_outfeed_with_outputs_training(tf1_graph):
    scenarios.check_no_outfeed_refused(SCHEDULE, training=True)


@pytest.mark.follows("testPipelineInvalidDeviceMapping")
@pytest.mark.parametrize("device_mapping, error, message", scenarios.invalid_device_mappings())
def test_pipeline_invalid_device_mapping(tf1_graph, device_mapping, error, message):
    with pytest.raises(error, match=message):
        scenarios.build_with_device_mapping(SCHEDULE, device_mapping)


@pytest.mark.follows("testPipelineWithDeviceMapping")
def test_pipeline_with_device_mapping():
    scenarios.check_inference_losses(SCHEDULE, [2, 0, 1])


@pytest.mark.follows("testPipelineWithDeviceMappingSameIpu")
def test_pipeline_with_device_mapping_same_ipu():
    scenarios.check_inference_losses(SCHEDULE, [2, 2, 2])


@pytest.mark.follows("testPipelineWithInfeedsKwargs")
def test_pipeline_with_infeeds_kwargs():
    scenarios.check_inference_losses(SCHEDULE)


@pytest.mark.follows("testIllegalCapture")
def test_illegal_capture(tf1_graph):
    scenarios.check_illegal_capture_refused(SCHEDULE)


@pytest.mark.follows("testPipelineOnlyOneStage")
def test_pipeline_only_one_stage(tf1_graph):
    scenarios.check_only_one_stage_refused(SCHEDULE)


@pytest.mark.follows("testDuplicateInputsOutputs")
def test_duplicate_inputs_outputs():
    scenarios.check_duplicate_inputs_outputs(SCHEDULE)


@pytest.mark.follows("testPipelineCompare1")
def test_pipeline_compare1():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.compare1())


@pytest.mark.follows("testPipelineCompare2")
def test_pipeline_compare2():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.compare2())


@pytest.mark.follows("testPipelineCompare3")
def test_pipeline_compare3():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.compare3())


@pytest.mark.follows("testPipelineCompareSharedWeights")
def test_pipeline_compare_shared_weights():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.shared_weights(1))


@pytest.mark.follows("testPipelineCompareSharedWeights2")
def test_pipeline_compare_shared_weights2():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.shared_weights(2))


@pytest.mark.follows("testPipelineCompareSharedWeights3")
def test_pipeline_compare_shared_weights3():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.shared_weights(3))
