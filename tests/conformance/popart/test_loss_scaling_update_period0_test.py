"""graphcore/popart tests/integration/loss_scaling_update_period0_test.py: automatic loss
scaling with an update period of 1 and 2 (also on two sharded IPUs), and with the gradients
of user-named tensors tracked, trains the weights a session without it trains, for SGD, Adam
and Adaptive (IpuModel2; Cpu here but for the sharded cases)."""

import numpy as np
import pytest
from popart_loss_scaling_checks import OPTIMIZER_NAMES, compare_with_reference, optimizer_pairs

PERIOD_1 = [10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0]
# The factor changes after weight updates 0, 2, 4, ...: the original's counter starts at -1.
PERIOD_2 = [10.0, 20.0, 20.0, 40.0, 40.0, 80.0, 80.0, 160.0]


def _pair(name):
    return optimizer_pairs()[OPTIMIZER_NAMES.index(name)]


@pytest.mark.follows("test_auto_loss_scaling_identical_weight_updates_update_period")
@pytest.mark.parametrize("optimizer", OPTIMIZER_NAMES)
def test_auto_loss_scaling_identical_weight_updates_update_period(tmp_path, optimizer):
    scales = compare_with_reference(tmp_path, _pair(optimizer), batches_per_step=8, update_period=1)
    np.testing.assert_array_equal(scales, PERIOD_1)


@pytest.mark.follows("test_auto_loss_scaling_identical_weight_updates_update_period2")
@pytest.mark.parametrize("optimizer", OPTIMIZER_NAMES)
def test_auto_loss_scaling_identical_weight_updates_update_period2(tmp_path, optimizer):
    scales = compare_with_reference(tmp_path, _pair(optimizer), batches_per_step=8, update_period=2)
    np.testing.assert_array_equal(scales, PERIOD_2)


@pytest.mark.follows("test_auto_loss_scaling_identical_weight_updates_sharded_update_period")
@pytest.mark.parametrize("optimizer", OPTIMIZER_NAMES)
def test_auto_loss_scaling_identical_weight_updates_sharded_update_period(tmp_path, optimizer):
    scales = compare_with_reference(
        tmp_path, _pair(optimizer), variant="IpuModel2", shard=True, batches_per_step=8,
        update_period=1,
    )  # fmt: skip
    np.testing.assert_array_equal(scales, PERIOD_1)


@pytest.mark.follows("test_auto_loss_scaling_identical_weight_updates_sharded_update_period2")
@pytest.mark.parametrize("optimizer", OPTIMIZER_NAMES)
def test_auto_loss_scaling_identical_weight_updates_sharded_update_period2(tmp_path, optimizer):
    scales = compare_with_reference(
        tmp_path, _pair(optimizer), variant="IpuModel2", shard=True, batches_per_step=8,
        update_period=2,
    )  # fmt: skip
    np.testing.assert_array_equal(scales, PERIOD_2)


@pytest.mark.follows("test_auto_loss_scaling_user_track_tensors")
@pytest.mark.parametrize("optimizer", OPTIMIZER_NAMES)
def test_auto_loss_scaling_user_track_tensors(tmp_path, optimizer):
    scales = compare_with_reference(
        tmp_path, _pair(optimizer), to_track=["init_input/1", "BatchNormalization:0", "init_input"]
    )
    # Small gradients at the start: the loss scale grows.
    assert np.all(scales[1:-1] != 10.0)
