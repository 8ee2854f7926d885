"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/distributed/popdist_strategy_test.py`.

The original runs under poprun as 2 instances of 1 replica each (`poprun_py_test`):
PopDistStrategy updates the IPU configuration with the instances, broadcasts initial
values from instance 0, reduces per-replica values across the instances (sum of
`strategy.run` results, mirrored and sync-on-read variables, batch normalisation's
moving statistics), feeds each instance its shard of a dataset. Here openipu's poprun
starts `popdist_strategy_program.py` as 2 instances, which runs the scenarios with the
original's expected values; each test checks its scenario passed on both instances.
"""

from __future__ import annotations

import pathlib

import poprun_scenarios
import pytest

pytestmark = pytest.mark.slow

PROGRAM = pathlib.Path(__file__).with_name("popdist_strategy_program.py")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return poprun_scenarios.run(PROGRAM, tmp_path_factory.mktemp("popdist_strategy"))


@pytest.mark.follows("test_update_ipu_config")
def test_update_ipu_config(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_update_ipu_config")


@pytest.mark.follows("test_strategy")
@pytest.mark.xfail(
    strict=True,
    reason="difference: a variable made in the strategy's scope is on the host device "
    "standing for the IPU (/job:worker/replica:0/task:N/device:CPU:0); the original's ends "
    "with /device:IPU:0 (the values, broadcast and reductions match; checked first)",
)
def test_strategy(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_strategy")


@pytest.mark.follows("test_strategy_without_ipu_reduction")
def test_strategy_without_ipu_reduction(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_strategy_without_ipu_reduction")


@pytest.mark.follows("test_strategy_with_sync_on_read_variable")
def test_strategy_with_sync_on_read_variable(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_strategy_with_sync_on_read_variable")


@pytest.mark.follows("test_strategy_with_mirrored_variable")
def test_strategy_with_mirrored_variable(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_strategy_with_mirrored_variable")


@pytest.mark.follows("test_distribute_dataset")
def test_distribute_dataset(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_distribute_dataset")


@pytest.mark.follows("test_all_reduce")
def test_all_reduce(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_all_reduce")


@pytest.mark.follows("test_batch_normalization")
def test_batch_normalization(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_batch_normalization")


@pytest.mark.follows("test_dataset_infeed")
def test_dataset_infeed(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_dataset_infeed")
