"""graphcore/popart tests/integration/operators_test/matmul_test_broadcasting_3.py: MatMul
broadcasting over these pairs of shapes, inference and gradients (Cpu)."""

import pytest
from popart_matmul_checks import check_matmul_broadcasting

SHAPES = (
    ([3, 1, 2, 4], [3, 4, 2]),
    ([1, 4, 2], [2]),
    ([1, 3], [4, 2, 3, 1]),
    ([4], [4, 2]),
    ([3, 1], [2, 3, 1, 4]),
    ([2], [2]),
    ([3, 2], [2]),
    ([2, 1], [3, 4, 1, 2]),
    ([1, 3], [1, 2, 3, 4]),
    ([3, 4], [3, 4, 1]),
    ([1, 2], [2, 1]),
    ([2], [2, 1]),
    ([2, 4], [4]),
    ([2], [4, 2, 1]),
    ([2, 4, 3], [4, 1, 3, 2]),
    ([1, 4, 3], [3, 1]),
    ([3, 4, 1], [1, 4]),
    ([4], [2, 4, 1]),
    ([1], [3, 1, 2]),
    ([1, 4], [4]),
    ([1, 2, 3, 4], [3, 2, 4, 1]),
    ([3], [1, 3, 4]),
    ([4, 2], [2]),
    ([2, 3], [3, 4]),
    ([3, 4, 1], [1]),
    ([1], [4, 2, 1, 3]),
    ([4, 1], [2, 1, 4]),
)


@pytest.mark.slow
@pytest.mark.follows("test_matmul_broadcasting_3")
def test_matmul_broadcasting_3(op_tester):
    check_matmul_broadcasting(op_tester, SHAPES)
