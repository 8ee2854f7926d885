"""graphcore/popart tests/integration/operators_test/splinebasis_test.py: ai.graphcore
SplineBasis (degrees 1 and 3, float32 and float16 pseudo-coordinates) against a numpy
transcription of torch_spline_conv's spline_basis (Cpu)."""

import numpy as np
import pytest
from popart_spline_checks import spline_basis


@pytest.mark.follows("test_basis")
@pytest.mark.parametrize("degree", [1, 3])
@pytest.mark.parametrize("num_edges,num_dims,max_kernel_size", [(6, 2, 6), (64, 3, 10)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_basis(op_tester, degree, num_edges, num_dims, max_kernel_size, dtype):
    rng = np.random.default_rng(0)
    pseudo = rng.random((num_edges, num_dims)).astype(dtype)
    kernel_size = rng.integers(1, max_kernel_size, num_dims).astype(np.int32)
    is_open_spline = rng.integers(0, 2, num_dims).astype(np.uint8)

    def init_builder(builder):
        inputs = [builder.addInputTensor(a) for a in (pseudo, kernel_size, is_open_spline)]
        basis, weight_index = builder.aiGraphcore.splinebasis(inputs, degree=degree)
        builder.addOutputTensor(basis)
        builder.addOutputTensor(weight_index)
        return [basis, weight_index]

    def reference(_):
        basis, weight_index = spline_basis(
            pseudo.astype(np.float32), kernel_size, is_open_spline, degree
        )
        return [basis.astype(dtype), weight_index]

    if dtype == np.float16:  # the reference is computed in float32, as the original's
        op_tester.atol = 1e-02
    op_tester.run(init_builder, reference)
