"""graphcore/popart tests/integration/operators_test/randomnormallike_test.py: RandomNormalLike draws: its input's shape and type, replaced by RandomNormal in the IR, the refused
seed attribute and DOUBLE input, and the statistics of many (IpuModel; the original's statistics, repeatability and replica
scenarios ran on hardware only, here on the emulated device)."""

import numpy as np
import pytest
from popart_random_checks import (
    SEED_ERROR,
    SUPPORTED_DTYPES,
    check_like_replaced,
    check_normal_stats,
    check_refused,
)


@pytest.mark.follows("test_randomnormallike")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomnormallike(dtypes):
    check_like_replaced(lambda b, t: b.aiOnnx.randomnormallike([t]), dtypes[0], "RandomNormal")


@pytest.mark.follows("test_randomnormallike_seederror")
def test_randomnormallike_seederror(op_tester):
    def make(b):
        return b.aiOnnx.randomnormallike(
            [b.addInputTensor(np.ones(10, dtype=np.float32))], seed=1.0
        )

    check_refused(op_tester, make, SEED_ERROR, at_end=True)


@pytest.mark.follows("test_randomnormallike_bad_dtype")
def test_randomnormallike_bad_dtype(op_tester):
    def make(b):
        return b.aiOnnx.randomnormallike([b.addInputTensor(np.ones(10, dtype=np.double))])

    check_refused(op_tester, make, "Unsupported data type requested", at_end=False)


@pytest.mark.follows("test_randomnormallike_stats")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomnormallike_stats(op_tester, dtypes):
    dtype, onnx_type = dtypes
    data = np.zeros((10000, 1), dtype=dtype)
    check_normal_stats(
        op_tester,
        lambda b: b.aiOnnx.randomnormallike(
            [b.addInputTensor(data)],
            dtype=onnx_type,
            mean=np.array(1.0, dtype),
            scale=np.array(2.0, dtype),
        ),
        dtype,
    )
