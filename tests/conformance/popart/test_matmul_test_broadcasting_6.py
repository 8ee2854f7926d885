"""graphcore/popart tests/integration/operators_test/matmul_test_broadcasting_6.py: MatMul
broadcasting over these pairs of shapes, inference and gradients (Cpu)."""

import pytest
from popart_matmul_checks import check_matmul_broadcasting

SHAPES = (
    ([2, 1, 4, 5, 1, 7, 8], [2, 3, 1, 5, 6, 8, 9]),
    ([2, 4, 5, 1, 1, 8, 7], [2, 4, 5, 3, 6, 7, 9]),
)


@pytest.mark.follows("test_matmul_broadcasting_6")
def test_matmul_broadcasting_6(op_tester):
    check_matmul_broadcasting(op_tester, SHAPES)
