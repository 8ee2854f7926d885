"""graphcore/popart tests/integration/operators_test/randomuniformlike_test.py: RandomUniformLike draws: its input's shape and type, replaced by RandomUniform in the IR, the refused
seed attribute and DOUBLE input, and the statistics of many (IpuModel; the original's statistics, repeatability and replica
scenarios ran on hardware only, here on the emulated device)."""

import numpy as np
import pytest
from popart_random_checks import (
    SEED_ERROR,
    SUPPORTED_DTYPES,
    check_like_replaced,
    check_refused,
    check_uniform_stats,
)


@pytest.mark.follows("test_randomuniformlike")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomuniformlike(dtypes):
    check_like_replaced(lambda b, t: b.aiOnnx.randomuniformlike([t]), dtypes[0], "RandomUniform")


@pytest.mark.follows("test_randomuniformlike_seederror")
def test_randomuniformlike_seederror(op_tester):
    def make(b):
        return b.aiOnnx.randomuniformlike(
            [b.addInputTensor(np.ones(10, dtype=np.float32))], seed=1.0
        )

    check_refused(op_tester, make, SEED_ERROR, at_end=True)


@pytest.mark.follows("test_randomuniformlike_bad_dtype")
def test_randomuniformlike_bad_dtype(op_tester):
    def make(b):
        return b.aiOnnx.randomuniformlike([b.addInputTensor(np.ones(10, dtype=np.double))])

    check_refused(op_tester, make, "Unsupported data type requested", at_end=False)


@pytest.mark.follows("test_randomuniformlike_stats")
@pytest.mark.parametrize("dtypes", SUPPORTED_DTYPES)
def test_randomuniformlike_stats(op_tester, dtypes):
    dtype, onnx_type = dtypes
    data = np.zeros((10000, 1), dtype=dtype)
    check_uniform_stats(
        op_tester,
        lambda b: b.aiOnnx.randomuniformlike(
            [b.addInputTensor(data)],
            dtype=onnx_type,
            low=np.array(-1.0, dtype),
            high=np.array(1.0, dtype),
        ),
        dtype,
    )
