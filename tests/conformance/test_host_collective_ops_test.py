"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/distributed/host_collective_ops_test.py`.

The original runs under poprun as 2 instances (`poprun_py_test`, 2 replicas): each
instance gathers, reduces (sum, mean) and broadcasts one tensor per instance through
`ipu.distributed.host_collective_ops`, for float16, float32, int8, int16, int32 and
int64; in a function, instances may call the collectives in different orders (they
are matched by tensor name); tensors whose dtype or shape differ between instances
are refused with UnknownError "Tensor layouts did not match on all instances". Here
openipu's poprun starts `host_collective_ops_program.py` as 2 instances, which runs
the scenarios with the original's expected values; each test checks its scenario
passed on both instances.
"""

from __future__ import annotations

import pathlib

import poprun_scenarios
import pytest

pytestmark = pytest.mark.slow

PROGRAM = pathlib.Path(__file__).with_name("host_collective_ops_program.py")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return poprun_scenarios.run(PROGRAM, tmp_path_factory.mktemp("host_collectives"))


@pytest.mark.follows("test_allgather")
def test_allgather(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_allgather")


@pytest.mark.follows("test_allreduce_sum")
def test_allreduce_sum(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_allreduce_sum")


@pytest.mark.follows("test_allreduce_mean")
def test_allreduce_mean(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_allreduce_mean")


@pytest.mark.follows("test_broadcast")
def test_broadcast(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_broadcast")


@pytest.mark.follows("test_all_allgather_different_order")
def test_all_allgather_different_order(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_all_allgather_different_order")


@pytest.mark.follows("test_allreduce_different_order")
def test_allreduce_different_order(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_allreduce_different_order")


@pytest.mark.follows("test_broadcast_different_order")
def test_broadcast_different_order(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_broadcast_different_order")


@pytest.mark.follows("test_allgather_different_dtype")
def test_allgather_different_dtype(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_allgather_different_dtype")


@pytest.mark.follows("test_allgather_different_shape")
def test_allgather_different_shape(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_allgather_different_shape")


@pytest.mark.follows("test_allreduce_different_dtype")
def test_allreduce_different_dtype(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_allreduce_different_dtype")


@pytest.mark.follows("test_allreduce_different_shape")
def test_allreduce_different_shape(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_allreduce_different_shape")


@pytest.mark.follows("test_broadcast_different_dtype")
def test_broadcast_different_dtype(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_broadcast_different_dtype")


@pytest.mark.follows("test_broadcast_different_shape")
def test_broadcast_different_shape(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_broadcast_different_shape")
