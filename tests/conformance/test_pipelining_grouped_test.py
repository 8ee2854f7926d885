"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/pipelining_grouped_test.py`.

The scenarios of `test_pipelining_sequential_test.py` with the Grouped schedule (the
models are in `pipeline_scenarios`): refusals, a 3-stage inference pipeline whose outfed
losses are the original's numbers (the profile's stage placement, a Poplar report, is
left out), duplicated stage inputs and outputs, and training pipelines compared with the
same model trained on the CPU with accumulated gradients (weights shared between stages
with each gradient-accumulation reduction method). Also an iteration count that is not
a multiple of the pipeline's depth.
"""

from __future__ import annotations

import numpy as np
import pipeline_scenarios as scenarios
import pytest
import tensorflow as tf
from pipeline_comparison import GA, Schedule, compare_to_cpu
from tensorflow.python import ipu

SCHEDULE = Schedule.Grouped


@pytest.mark.follows("testPipelineNoOutfeedInference")
def test_pipeline_no_outfeed_inference(tf1_graph):
    scenarios.check_no_outfeed_refused(SCHEDULE, training=False)


@pytest.mark.follows("testPipelineNoOutfeedWithOutputsTraining")
def test_pipeline_no_outfeed_with_outputs_training(tf1_graph):
    scenarios.check_no_outfeed_refused(SCHEDULE, training=True)


@pytest.mark.follows("testPipelineIterationsNotMultiple")
def test_pipeline_iterations_not_multiple(tf1_graph):
    infeed = scenarios.dict_infeed()

    def my_net(c):
        return ipu.pipelining_ops.pipeline(
            [scenarios.conv_stage, scenarios.sum_stage, scenarios.identity_stage],
            10,
            inputs=[c],
            infeed_queue=infeed,
            outfeed_queue=ipu.ipu_outfeed_queue.IPUOutfeedQueue(),
            pipeline_schedule=SCHEDULE,
        )

    with tf.device("cpu"):
        c = tf.compat.v1.placeholder(np.float32, shape=[])
    compiled = scenarios.compile_in_ipu_scope(my_net, [c])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 4
    config.configure_ipu_system()
    try:
        ipu.utils.move_variable_initialization_to_cpu()
        with tf.compat.v1.Session(graph=tf1_graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(infeed.initializer)
            with pytest.raises(
                tf.errors.FailedPreconditionError,
                match="The number of iterations of the pipeline must be a multiple of 3",
            ):
                sess.run(compiled, {c: 10.01})
    finally:
        ipu.config.reset_ipu_configuration()


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


@pytest.mark.follows("testPipelineCompareSharedWeights1")
@pytest.mark.parametrize("reduction_method", list(GA), ids=lambda m: m.name)
def test_pipeline_compare_shared_weights1(reduction_method):
    model = scenarios.shared_weights(1, gradient_accumulation_count=20)
    model["device_mapping"] = [0, 1, 2, 3, 0]
    compare_to_cpu(schedule=SCHEDULE, reduction_method=reduction_method, **model)


@pytest.mark.follows("testPipelineCompareSharedWeights2")
def test_pipeline_compare_shared_weights2():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.shared_weights(2, gradient_accumulation_count=20))


@pytest.mark.follows("testPipelineCompareSharedWeights3")
def test_pipeline_compare_shared_weights3():
    compare_to_cpu(schedule=SCHEDULE, **scenarios.shared_weights(3, gradient_accumulation_count=20))
