"""graphcore/popart tests/integration/operators_test/bucketize_test.py: ai.graphcore
Bucketize of int32 and float32 values (NaN and infinity too) against boundaries, with
`right` either way, against torch.bucketize's binary search written in numpy (Cpu)."""

import numpy as np
import pytest


def _bucketize(values: np.ndarray, boundaries: np.ndarray, right: bool) -> np.ndarray:
    """torch.bucketize's lower (upper, with `right`) bound by binary search, also on
    boundaries that are not sorted, where the search still decides the answer."""

    def search(value):
        start, end = 0, len(boundaries)
        while start < end:
            mid = start + (end - start) // 2
            past = boundaries[mid] > value if right else boundaries[mid] >= value
            if past:
                end = mid
            else:
                start = mid + 1
        return start

    flat = [search(v) for v in values.reshape(-1)]
    return np.array(flat, dtype=np.int32).reshape(values.shape)


def _run(op_tester, right, data, dtype):
    values, boundaries = (np.array(d, dtype=dtype) for d in data)

    def init_builder(builder):
        inputs = [builder.addInputTensor(values), builder.addInputTensor(boundaries)]
        out = builder.aiGraphcore.bucketize(inputs, right=int(right))
        builder.addOutputTensor(out)
        return [out]

    op_tester.run(init_builder, lambda _: [_bucketize(values, boundaries, right)])


BASIC_DATA = [
    ([[3, 6, 9], [3, 6, 10], [-1, 0, 1], [8, 9, 140]], [1, 3, 5, 7, 9]),
    ([[2, 5, 10], [6, 8, 3]], [1, 5, 7, 8, 10]),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5, 6]),
    ([[[1, 3, 5], [2, 4, 6]], [[1, 2, 3], [4, 5, 6]]], [1, 2, 3, 4, 5, 6]),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 6, 4, 5]),
]


@pytest.mark.follows("test_basic")
@pytest.mark.parametrize("right", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("data", BASIC_DATA)
def test_basic(op_tester, right, data, dtype):
    _run(op_tester, right, data, dtype)


@pytest.mark.follows("test_fp")
@pytest.mark.parametrize("right", [True, False])
@pytest.mark.parametrize(
    "data",
    [
        ([1, 2, 3, 4, 5, 6, 7, 8, 9], [0.9, 1, 2, 2, 3, 3, 4, 4.1, 9, 9]),
        ([[[1, 3, 5], [2, 4, 6]], [[1, 2, 3], [4, 5, 6]]], [0.9, 1, 2, 2, 3, 3, 4, 4.1, 9, 9]),
    ],
)
def test_fp(op_tester, right, data):
    # The original parametrizes over its integer data again; its repeated boundaries are the
    # floating point case it names.
    _run(op_tester, right, data, np.float32)


@pytest.mark.follows("test_special_case_fp")
@pytest.mark.parametrize("right", [True, False])
@pytest.mark.parametrize("special", ["nan", "inf"])
def test_special_case_fp(op_tester, right, special):
    value = float(special)
    _run(op_tester, right, ([1.0, value, 2.0, value], [0.0, 1.0, 2.0, 3.0]), np.float32)


@pytest.mark.follows("test_scalar")
@pytest.mark.parametrize("right", [True, False])
def test_scalar(op_tester, right):
    _run(op_tester, right, ([1.0, float("nan"), 2.0, float("nan")], [1.0]), np.float32)
