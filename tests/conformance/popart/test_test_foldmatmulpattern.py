"""graphcore/popart tests/integration/pattern_tests/test_foldmatmulpattern.py: a trained
MatMul of a [2, 384, 1024] input by a [1024, 1024] weight has the right value and gradients,
and the IR holds three MatMuls (one forward, two gradient) whose first input folds the two
leading dimensions into one ([1 768 1024]) and no ReduceSum (Cpu)."""

import numpy as np
import pytest
from popart_ir_checks import ir_of

import popart


@pytest.mark.follows("test_issue")
def test_issue(op_tester):
    d1 = np.random.rand(2, 384, 1024).astype(np.float32)
    d2 = np.random.rand(1024, 1024).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        i2 = builder.addInputTensor(d2)
        t1 = builder.aiOnnx.matmul([i1, i2])
        builder.addOutputTensor(t1)
        return [t1, g + t1, g + i1, g + i2]

    def reference(ref_data):
        d_out = ref_data.getOutputTensorGrad(0)
        d_lhs = d_out @ d2.T
        d_rhs = np.einsum("bmk,bmn->kn", d1, d_out)
        return [d1 @ d2, d_out, d_lhs, d_rhs]

    op_tester.patterns = popart.Patterns(popart.PatternsLevel.Default)
    op_tester.options.enableOutlining = False
    op_tester.rtol = 1e-4
    op_tester.atol = 1e-4
    session = op_tester.run(init_builder, reference, "train")
    graph = ir_of(session)["maingraph"]
    assert "ReduceSum" not in [op["type"] for op in graph]
    matmuls = [op for op in graph if op["type"] == "MatMul"]
    assert len(matmuls) == 3
    assert matmuls[0]["inputs"][0]["shape"] == "[1 768 1024]"
