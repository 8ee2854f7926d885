"""graphcore/popart tests/integration/auto_loss_scaling_gradient_accumulation_test.py: with
gradient accumulation, automatic loss scaling accumulates the histogram counts
(`Accum___autoLossScaleStats`) over a group's micro-batches and changes the loss scale once
per group, for both tracking methods: ConvAndMatmulGradients tracks three gradients of the
model (the Conv's weights and data, the MatMul's weights), AllNonViewChangingGradientTensors
also the Relu's (Cpu)."""

import numpy as np
import pytest
from popart_loss_scaling_checks import FINAL_LOSS_SCALE, build_model, prepared_session

import popart

STATISTICS = "Accum___autoLossScaleStats"


@pytest.mark.follows("test_loss_scale_updates_with_grad_accumulation_correctness")
@pytest.mark.parametrize(
    "method, tracked",
    [
        (popart.GradientTensorTrackingMethod.ConvAndMatmulGradients, 3),
        (popart.GradientTensorTrackingMethod.AllNonViewChangingGradientTensors, 4),
    ],
)
def test_loss_scale_updates_with_grad_accumulation_correctness(method, tracked):
    initial, factor, steps = 1000.0, 5, 4
    options = popart.SessionOptions()
    settings = options.automaticLossScalingSettings
    settings.enabled = True
    settings.binEdgeLocation = 0.5
    settings.thresholdUpperCountProportion = 0.2
    settings.gradientTensorTrackingMethod = method
    options.enableGradientAccumulation = True
    options.accumulationFactor = factor
    model = build_model()
    optimizer = popart.SGD({"lossScaling": (initial, False)})
    session = prepared_session(model, optimizer, options, [STATISTICS, FINAL_LOSS_SCALE], steps)
    arrays = session.initAnchorArrays()
    samples = steps * factor
    inputs = {
        model.data: 10000.0 * np.random.rand(samples, *model.data_shape).astype(np.float16),
        model.label: np.random.randint(0, 2, samples * 2).astype(np.int32),
    }
    session.run(popart.PyStepIO(inputs, arrays))
    scales = arrays[FINAL_LOSS_SCALE]
    assert scales.shape == (steps, factor)
    # One loss scale per group, changed between groups.
    assert np.all(scales == scales[:, :1])
    assert np.all(np.diff(scales[:, 0]) != 0) and scales[0, 0] == initial
    # The counts grow by every tracked element of each micro-batch of the group.
    elements = tracked * int(np.prod(model.data_shape))
    totals = arrays[STATISTICS].sum(axis=-1)
    np.testing.assert_array_equal(totals, np.tile(elements * np.arange(1, factor + 1), (steps, 1)))
