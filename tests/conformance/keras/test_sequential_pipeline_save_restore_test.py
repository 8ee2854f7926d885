"""Conformance: graphcore/keras `keras/ipu/sequential_pipeline_save_restore_test.py`.

A Sequential model pipelined over 2 IPUs (`set_pipeline_stage_assignment`): weights saved
after fit (by `save_weights` or a ModelCheckpoint callback) are restored into a new model
and training continues from them, as the same model on the CPU; a bad path fails as the
original's (see `pipeline_save_restore_checks`).
"""

from __future__ import annotations

import pytest
import tf_keras as keras
from pipeline_save_restore_checks import (
    ACCUMULATION,
    check_can_save_weights,
    check_invalid_restore_path,
    check_training_checkpoint,
    fixed_weight_layers,
)

SAMPLES = 72
STEPS = 24


def _fixed_weight_pipeline():
    m = keras.Sequential(fixed_weight_layers())
    m.set_pipeline_stage_assignment(list(range(2)))
    m.set_pipelining_options(gradient_accumulation_steps_per_replica=ACCUMULATION)
    return m


@pytest.fixture
def two_ipus(strategy_on):
    return strategy_on(2)


@pytest.mark.follows("testCanSaveWeights")
def test_can_save_weights(two_ipus, tmp_path):
    check_can_save_weights(
        two_ipus, _fixed_weight_pipeline, fixed_weight_layers, SAMPLES, STEPS, tmp_path
    )


@pytest.mark.follows("testCanDoTrainingCheckpoint")
@pytest.mark.slow
def test_can_do_training_checkpoint(two_ipus, tmp_path):
    check_training_checkpoint(
        two_ipus, _fixed_weight_pipeline, fixed_weight_layers, SAMPLES, STEPS, tmp_path
    )


@pytest.mark.follows("testInvalidRestorePath")
def test_invalid_restore_path(two_ipus, tmp_path):
    check_invalid_restore_path(two_ipus, _fixed_weight_pipeline, STEPS, tmp_path)
