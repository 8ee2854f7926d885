"""graphcore/popart tests/integration/operators_test/randomuniform_test.py: RandomUniform draws: minimum, maximum and mean of many, the same ones after the same seed,
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
    check_refused,
    check_repeatable,
    check_uniform_stats,
)


@pytest.mark.follows("test_randomuniform_stats")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomuniform_stats(op_tester, dtypes):
    dtype, onnx_type = dtypes

    check_uniform_stats(
        op_tester,
        lambda b: b.aiOnnx.randomuniform(
            shape=[10000, 1], dtype=onnx_type, low=np.array(-1.0, dtype), high=np.array(1.0, dtype)
        ),
        dtype,
    )


@pytest.mark.follows("test_randomuniform_repeatable")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomuniform_repeatable(dtypes):
    check_repeatable(lambda b: b.aiOnnx.randomuniform(shape=[10, 1], dtype=dtypes[1]))


@pytest.mark.follows("test_randomuniform_multi")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomuniform_multi(op_tester, dtypes):
    check_multi(
        op_tester,
        lambda b, name: b.aiOnnx.randomuniform(shape=[10, 1], dtype=dtypes[1], debugContext=name),
        dtypes[0],
    )


@pytest.mark.follows("test_randomuniform_repeatable_replica")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomuniform_repeatable_replica(dtypes):
    check_distinct_per_replica(lambda b: b.aiOnnx.randomuniform(shape=[10, 1], dtype=dtypes[1]))


@pytest.mark.follows("test_randomuniform_seederror")
def test_randomuniform_seederror(op_tester):
    check_refused(
        op_tester,
        lambda b: b.aiOnnx.randomuniform(shape=[1000, 1], seed=1.0),
        SEED_ERROR,
        at_end=True,
    )


@pytest.mark.follows("test_randomuniform_bad_dtype")
def test_randomuniform_bad_dtype(op_tester):
    check_refused(
        op_tester,
        lambda b: b.aiOnnx.randomuniform(shape=[1000, 1], dtype=onnx.helper.TensorProto.DOUBLE),
        "The data type DOUBLE is not supported in Poplar",
        at_end=False,
    )
