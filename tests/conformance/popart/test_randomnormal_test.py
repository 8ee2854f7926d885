"""graphcore/popart tests/integration/operators_test/randomnormal_test.py: RandomNormal draws: mean and standard deviation of many, the same ones after the same seed,
distinct ones per op and per replica, and the refused seed attribute and DOUBLE type (IpuModel; the original's statistics, repeatability and replica
scenarios ran on hardware only, here on the emulated device)."""

import numpy as np
import onnx
import pytest
from popart_random_checks import (
    SEED_ERROR,
    SUPPORTED_DTYPES,
    check_distinct_per_replica,
    check_multi,
    check_normal_stats,
    check_refused,
    check_repeatable,
)


@pytest.mark.follows("test_randomnormal_stats")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomnormal_stats(op_tester, dtypes):
    dtype, onnx_type = dtypes
    expected_mean, expected_stddev = np.array(1.0, dtype), np.array(2.0, dtype)
    check_normal_stats(
        op_tester,
        lambda b: b.aiOnnx.randomnormal(
            shape=[10000, 1], dtype=onnx_type, mean=expected_mean, scale=expected_stddev
        ),
        dtype,
    )


@pytest.mark.follows("test_randomnormal_repeatable")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomnormal_repeatable(dtypes):
    check_repeatable(lambda b: b.aiOnnx.randomnormal(shape=[10, 1], dtype=dtypes[1]))


@pytest.mark.follows("test_randomnormal_multi")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomnormal_multi(op_tester, dtypes):
    check_multi(
        op_tester,
        lambda b, name: b.aiOnnx.randomnormal(shape=[10, 1], dtype=dtypes[1], debugContext=name),
        dtypes[0],
    )


@pytest.mark.follows("test_randomnormal_repeatable_replica")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomnormal_repeatable_replica(dtypes):
    check_distinct_per_replica(lambda b: b.aiOnnx.randomnormal(shape=[10, 1], dtype=dtypes[1]))


@pytest.mark.follows("test_randomnormal_seederror")
def test_randomnormal_seederror(op_tester):
    check_refused(
        op_tester,
        lambda b: b.aiOnnx.randomnormal(shape=[1000, 1], seed=1.0),
        SEED_ERROR,
        at_end=True,
    )


@pytest.mark.follows("test_randomnormal_bad_dtype")
def test_randomnormal_bad_dtype(op_tester):
    check_refused(
        op_tester,
        lambda b: b.aiOnnx.randomnormal(shape=[1000, 1], dtype=onnx.helper.TensorProto.DOUBLE),
        "The data type DOUBLE is not supported in Poplar",
        at_end=False,
    )
