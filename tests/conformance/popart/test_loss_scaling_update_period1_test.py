"""graphcore/popart tests/integration/loss_scaling_update_period1_test.py: automatic loss
scaling with gradient accumulation (also pipelined on two IPUs), update periods 1 and 2: the
loss scale changes once per accumulation group, and the weights are those a session without
it trains, for SGD, Adam and Adaptive (IpuModel2; Cpu here but for the pipelined cases)."""

import numpy as np
import pytest
from popart_loss_scaling_checks import OPTIMIZER_NAMES, compare_with_reference, optimizer_pairs

ACCUMULATION = 3
PERIOD_1 = np.repeat([10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0], ACCUMULATION)
PERIOD_2 = np.repeat([10.0, 20.0, 20.0, 40.0, 40.0, 80.0, 80.0, 160.0], ACCUMULATION)


def _scales(tmp_path, optimizer, period, **pipelined):
    pair = optimizer_pairs()[OPTIMIZER_NAMES.index(optimizer)]
    return compare_with_reference(
        tmp_path, pair, accumulation_factor=ACCUMULATION, batches_per_step=8,
        update_period=period, **pipelined,
    )  # fmt: skip


@pytest.mark.follows(
    "test_auto_loss_scaling_identical_weight_updates_grad_accumulation_update_period"
)
@pytest.mark.parametrize("optimizer", OPTIMIZER_NAMES)
def test_auto_loss_scaling_identical_weight_updates_grad_accumulation_update_period(
    tmp_path, optimizer
):
    np.testing.assert_array_equal(_scales(tmp_path, optimizer, 1), PERIOD_1)


@pytest.mark.follows(
    "test_auto_loss_scaling_identical_weight_updates_grad_accumulation_update_period2"
)
@pytest.mark.parametrize("optimizer", OPTIMIZER_NAMES)
def test_auto_loss_scaling_identical_weight_updates_grad_accumulation_update_period2(
    tmp_path, optimizer
):
    np.testing.assert_array_equal(_scales(tmp_path, optimizer, 2), PERIOD_2)


PIPELINED = {"variant": "IpuModel2", "shard": True, "pipeline": True}


@pytest.mark.follows(
    "test_auto_loss_scaling_identical_weight_updates_grad_accumulation_pipeline_update_period"
)
@pytest.mark.parametrize("optimizer", OPTIMIZER_NAMES)
def test_auto_loss_scaling_identical_weight_updates_grad_accumulation_pipeline_update_period(
    tmp_path, optimizer
):
    np.testing.assert_array_equal(_scales(tmp_path, optimizer, 1, **PIPELINED), PERIOD_1)


@pytest.mark.follows(
    "test_auto_loss_scaling_identical_weight_updates_grad_accumulation_pipeline_update_period2"
)
@pytest.mark.parametrize("optimizer", OPTIMIZER_NAMES)
def test_auto_loss_scaling_identical_weight_updates_grad_accumulation_pipeline_update_period2(
    tmp_path, optimizer
):
    # The original skips this one (its issue T61577); here it behaves as the others.
    np.testing.assert_array_equal(_scales(tmp_path, optimizer, 2, **PIPELINED), PERIOD_2)
