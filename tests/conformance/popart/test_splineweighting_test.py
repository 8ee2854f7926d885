"""graphcore/popart tests/integration/operators_test/splineweighting_test.py: ai.graphcore
SplineWeighting (float32 and float16) against a numpy transcription of torch_spline_conv's
spline_weighting (Cpu)."""

import numpy as np
import pytest
from popart_spline_checks import spline_weighting


@pytest.mark.follows("test_basis")
@pytest.mark.parametrize(
    "num_edges,in_ch,out_ch,kernel_size,num_splines", [(6, 4, 4, 10, 8), (16, 5, 6, 6, 6)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_basis(op_tester, num_edges, in_ch, out_ch, kernel_size, num_splines, dtype):
    rng = np.random.default_rng(0)
    x = rng.random((num_edges, in_ch)).astype(dtype)
    weight = rng.random((kernel_size, in_ch, out_ch)).astype(dtype)
    basis = rng.random((num_edges, num_splines)).astype(dtype)
    weight_index = rng.integers(0, kernel_size, (num_edges, num_splines)).astype(np.int32)

    def init_builder(builder):
        inputs = [builder.addInputTensor(a) for a in (x, weight, basis, weight_index)]
        out = builder.aiGraphcore.splineweighting(inputs)
        builder.addOutputTensor(out)
        return [out]

    def reference(_):
        return [spline_weighting(x, weight, basis, weight_index).astype(dtype)]

    if dtype == np.float16:  # the reference is computed in float32, as the original's
        op_tester.atol = 1e-02
    op_tester.run(init_builder, reference)
